"""Self-contained HTML reports: verdict first, then charts (inline SVG), then details.

One file per run in ``reports/`` plus a JSON sidecar (what the index and ``peakproof
run`` read), and ``reports/index.html`` listing runs newest first. No JavaScript, no
external assets: a report opens from disk, from CI artifacts, from mail.
"""

from __future__ import annotations

import html
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import CheckResult
from .timefmt import moment
from .verdict import Outcome, Verdict, judge_results

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


@dataclass
class Chart:
    title: str
    y_label: str
    series: dict[str, list[tuple[float, float]]]
    x_label: str = "seconds since start"
    note: str = ""
    # the nemesis's fault windows on the same axis: (start, end or None = to the end, label)
    faults: list[tuple[float, float | None, str]] = field(default_factory=list)


@dataclass
class RunReport:
    scenario: str
    target: str
    started: float
    finished: float
    params: dict[str, Any]
    checks: list[CheckResult]
    slos: list[CheckResult]
    load: list[CheckResult]
    charts: list[Chart] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    locust_html: str | None = None
    harness_errors: list[str] = field(default_factory=list)  # tracebacks: the run is INCONCLUSIVE
    witnesses: list[Any] = field(default_factory=list)  # peakproof.witness.Witness: one per violated check

    @property
    def judged(self) -> Verdict:
        return judge_results([*self.load, *self.checks, *self.slos], [e.splitlines()[-1] if e.strip() else e
                                                                      for e in self.harness_errors])

    @property
    def outcome(self) -> Outcome:
        return self.judged.outcome

    @property
    def verdict(self) -> bool:
        """True only for PASS (kept for callers that want a yes/no)."""
        return self.outcome is Outcome.PASS

    def slug(self) -> str:
        return f"{self.scenario}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(self.started))}"

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "target": self.target, "started": self.started, "finished": self.finished,
                "pass": self.verdict, "verdict": self.judged.to_json(), "params": self.params,
                "harness_errors": self.harness_errors,
                "load": [r.to_json() for r in self.load], "checks": [r.to_json() for r in self.checks],
                "slos": [r.to_json() for r in self.slos], "details": self.details, "locust_html": self.locust_html,
                "witnesses": [w.to_json() for w in self.witnesses],
                # what the HTML draws, as data: a reader can check a charted figure against the judged one
                "charts": [{"title": c.title, "y_label": c.y_label, "x_label": c.x_label, "note": c.note,
                            "series": {k: [list(p) for p in v] for k, v in c.series.items()}} for c in self.charts]}


def write_report(report: RunReport, directory: str | Path = "reports") -> Path:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    slug = report.slug()
    path = out / f"{slug}.html"
    n = 1
    while path.exists():  # two runs in one second keep both reports
        n += 1
        path = out / f"{slug}-{n}.html"
    path.write_text(render(report), encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps({**report.to_json(), "html": path.name}, indent=1, default=str),
                                         encoding="utf-8")
    write_index(out)
    return path


def write_index(directory: Path) -> Path:
    runs = []
    for sidecar in directory.glob("*.json"):
        try:
            doc = json.loads(sidecar.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue
        if isinstance(doc, dict) and "html" in doc and "started" in doc:
            runs.append(doc)
    runs.sort(key=lambda d: d["started"], reverse=True)
    rows = []
    for d in runs:
        outcome = _outcome(d)
        rows.append(f"<tr><td>{_when(d['started'])}</td><td><a href='{html.escape(d['html'])}'>"
                    f"{html.escape(d['scenario'])}</a></td><td>{html.escape(str(d.get('target', '')))}</td>"
                    f"<td class='{CSS[outcome]}'>{outcome}</td><td>{html.escape(_first_reason(d))}</td></tr>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>peakproof runs</title>{_STYLE}</head><body>"
            f"<h1>peakproof runs</h1><table><tr><th>started</th><th>scenario</th><th>target</th><th>verdict</th>"
            f"<th>why</th></tr>{''.join(rows)}</table></body></html>")
    path = directory / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


CSS = {"PASS": "pass", "FAIL": "fail", "INCONCLUSIVE": "unknown"}


def _outcome(d: dict[str, Any]) -> str:
    v = d.get("verdict")
    if isinstance(v, dict) and v.get("outcome") in CSS:
        return v["outcome"]
    return "PASS" if d.get("pass") else "FAIL"  # sidecars written before three outcomes


def _first_reason(d: dict[str, Any]) -> str:
    v = d.get("verdict")
    if isinstance(v, dict) and v.get("reasons"):
        return str(v["reasons"][0])[:200]
    for group in ("load", "checks", "slos"):
        for r in d.get(group, []):
            if r.get("valid") is False:
                return f"{r['name']}: {r.get('first_violation') or ''}"[:200]
    return ""


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def render(r: RunReport) -> str:
    judged = r.judged
    verdict = judged.outcome.value
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(r.scenario)} {verdict}</title>"
             f"{_STYLE}</head><body>",
             f"<h1>{html.escape(r.scenario)}: <span class='{CSS[verdict]}'>{verdict}</span></h1>",
             f"<p>target <code>{html.escape(r.target)}</code>; started {_when(r.started)}, "
             f"{r.finished - r.started:.1f} s</p>"]
    if judged.reasons:
        title = "Why it failed" if verdict == "FAIL" else "Why it is inconclusive (the harness could not decide)"
        parts.append(f"<div class='box {CSS[verdict]}'><b>{title}</b><ul>" + "".join(
            f"<li>{html.escape(reason)}</li>" for reason in judged.reasons) + "</ul></div>")
    for err in r.harness_errors:
        parts.append(f"<h3>Harness error</h3><pre>{html.escape(err)}</pre>")
    for title, group in (("Offered load", r.load), ("Invariants", r.checks), ("Service levels", r.slos)):
        parts.append(f"<h2>{title}</h2>" + _results_table(group))
    if r.witnesses:
        parts.append("<h2>Reproductions</h2>" + "".join(witness_html(w) for w in r.witnesses))
    parts.append("<h2>Charts</h2>")
    for chart in r.charts:
        parts.append(f"<figure><figcaption>{html.escape(chart.title)}</figcaption>{svg_chart(chart)}"
                     + (f"<p class='note'>{html.escape(chart.note)}</p>" if chart.note else "") + "</figure>")
    parts.append("<h2>Details</h2>")
    if r.locust_html:
        parts.append(f"<p>Locust's own report: <a href='{html.escape(r.locust_html)}'>{html.escape(r.locust_html)}</a></p>")
    parts.append("<h3>Parameters</h3>" + _kv_table(r.params))
    for key, value in r.details.items():
        parts.append(f"<h3>{html.escape(key)}</h3>"
                     + (_kv_table(value) if isinstance(value, dict) else f"<pre>{html.escape(str(value))}</pre>"))
    for res in [*r.checks, *r.slos]:
        if res.due:
            parts.append(_due_table(res))
    for group in (r.load, r.checks, r.slos):
        for res in group:
            if res.examples:
                parts.append(f"<h3>{html.escape(res.name)}: examples</h3><pre>"
                             + html.escape("\n".join(e if isinstance(e, str) else repr(e)  # a story reads as told
                                                     for e in res.examples[:5])) + "</pre>")
    parts.append("</body></html>")
    return "".join(parts)


def witness_html(w: Any) -> str:
    """A witness (peakproof.witness.Witness): its headline, the numbered table, its files and curl lines."""
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in s.cells(n)) + "</tr>"
                   for n, s in enumerate(w.steps, 1))
    files = w.target.get("files") or []
    out = (f"<h3>{html.escape(w.check)}</h3><p>{html.escape(w.headline())}</p>"
           f"<p>as found: {html.escape(w.violation)}</p>"
           + (f"<p>in the last replay that failed again: {html.escape(w.last_violation)}</p>" if w.last_violation else "")
           + "<table><tr><th>#</th><th>who</th><th>what</th><th>when</th><th>answer</th></tr>" + rows + "</table>")
    if files:
        out += "<p>replay it: " + ", ".join(f"<code>{html.escape(str(f))}</code>" for f in files) + "</p>"
    if w.curl:
        out += "<p>the same requests with curl (ids of one replay):</p><pre>" + html.escape("\n".join(w.curl)) + "</pre>"
    return out


def _results_table(results: list[CheckResult]) -> str:
    if not results:
        return "<p>none</p>"
    rows = []
    for res in results:
        mark = {True: "pass", False: "fail", "unknown": "unknown", "waived": "unknown"}[res.valid]
        actual, limit = res.actual_limit()  # the one rendering (peakproof.checks.Measure)
        chances = "" if res.chances is None else f"{res.chances:,} {res.chance_kind}".strip()
        violations = res.counts.get("violations", "")
        rows.append(f"<tr><td class='{mark}'>{mark.upper()}</td><td>{html.escape(res.name)}</td>"
                    f"<td>{html.escape(chances)}</td><td>{html.escape(_fmt_count(violations))}</td>"
                    f"<td>{html.escape(actual)}</td><td>{html.escape(limit)}</td>"
                    f"<td>{html.escape(res.why() or '')}</td></tr>")
    return ("<table><tr><th></th><th>property</th><th>chances to fail</th><th>violations</th><th>Actual</th>"
            "<th>Limit</th><th>first violation / note</th></tr>" + "".join(rows) + "</table>")


DUE_SHOWN = 50  # due moments listed per check: the violated ones first, then by time


def _due_table(res: CheckResult) -> str:
    """The moments the rules made ``res``'s promise due and how each ended (the violated first)."""
    ended = res.due_ended()
    counts = ", ".join(f"{n:,} {end}" for end, n in ended.items() if n)
    shown = res.due_kept(DUE_SHOWN)
    css = {"held": "pass", "violated": "fail", "undecided": "unknown"}
    rows = "".join(f"<tr><td class='{css[d.ended]}'>{d.ended}</td><td>{html.escape(moment(d.at))}</td>"
                   f"<td>{html.escape(d.what)}</td><td>{html.escape(d.detail)}</td></tr>" for d in shown)
    total = sum(ended.values())
    more = f"<p class='note'>{total - len(shown):,} more not listed.</p>" if total > len(shown) else ""
    return (f"<h3>{html.escape(res.name)}: moments it fell due ({counts})</h3><table><tr><th>ended</th>"
            f"<th>due at</th><th>what was due</th><th>what happened</th></tr>{rows}</table>{more}")


def _fmt_count(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else str(v)


def _kv_table(d: dict[str, Any]) -> str:
    return "<table>" + "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
                               for k, v in d.items()) + "</table>"


def svg_chart(chart: Chart, width: int = 980, height: int = 260) -> str:
    pts = [p for s in chart.series.values() for p in s]
    if not pts:
        return "<p class='note'>no data</p>"
    left, right, top, bottom = 64, 270, 12, 34  # room for legends like "p99 follows more than 51 above"
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)  # negative counts are findings: show them
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = _nice(y1 if y1 > 0 else 1)
    y0 = -_nice(-y0) if y0 < 0 else 0.0
    w, h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * w

    def sy(y: float) -> float:
        return top + h - ((y - y0) / (y1 - y0)) * h

    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' class='chart'>",
           f"<rect x='{left}' y='{top}' width='{w}' height='{h}' fill='#fafafa' stroke='#ccc'/>"]
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        out.append(f"<line x1='{left}' x2='{left + w}' y1='{sy(yv):.1f}' y2='{sy(yv):.1f}' stroke='#e5e5e5'/>"
                   f"<text x='{left - 6}' y='{sy(yv) + 4:.1f}' text-anchor='end'>{_short(yv)}</text>")
    for i in range(6):
        xv = x0 + (x1 - x0) * i / 5
        out.append(f"<text x='{sx(xv):.1f}' y='{top + h + 16}' text-anchor='middle'>{_short(xv)}</text>")
    out.append(f"<text x='{left + w / 2}' y='{height - 4}' text-anchor='middle'>{html.escape(chart.x_label)}</text>")
    out.append(f"<text x='12' y='{top + h / 2}' transform='rotate(-90 12 {top + h / 2})' text-anchor='middle'>"
               f"{html.escape(chart.y_label)}</text>")
    for k, (start, end, label) in enumerate(chart.faults):  # shaded under the series, labelled at the top
        a, b = max(x0, start), min(x1, x1 if end is None else end)
        if b < a:
            continue
        out.append(f"<rect x='{sx(a):.1f}' y='{top}' width='{max(1.0, sx(b) - sx(a)):.1f}' height='{h}' "
                   f"fill='#f3c7c7' fill-opacity='0.45'><title>{html.escape(label)}</title></rect>"
                   f"<text x='{sx(a) + 3:.1f}' y='{top + 11 + 11 * (k % 3)}' fill='#a33'>{html.escape(label)}</text>")
    for i, (name, series) in enumerate(chart.series.items()):
        color = PALETTE[i % len(PALETTE)]
        if series:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(series))
            out.append(f"<polyline fill='none' stroke='{color}' stroke-width='1.8' points='{path}'/>")
        ly = top + 14 + 18 * i
        out.append(f"<rect x='{left + w + 10}' y='{ly - 9}' width='12' height='4' fill='{color}'/>"
                   f"<text x='{left + w + 28}' y='{ly - 4}'>{html.escape(name)}</text>")
    out.append("</svg>")
    return "".join(out)


def _nice(v: float) -> float:
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _short(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:.3g}" if v != int(v) else f"{int(v)}"


_STYLE = """<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:6px 0 14px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.pass{color:#0a7a2f;font-weight:600}.fail{color:#c0151b;font-weight:600}.unknown{color:#a66b00;font-weight:600}
.box.fail{border:2px solid #c0151b;padding:8px 14px;color:#222;background:#fff5f5}
.box.unknown{border:2px solid #a66b00;padding:8px 14px;color:#222;background:#fffaf0}
figure{margin:10px 0 22px}figcaption{font-weight:600;margin-bottom:4px}.chart text{font-size:11px;fill:#444}
.note{color:#666;font-size:12px}pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}
</style>"""
