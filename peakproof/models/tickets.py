"""Case T's models: the back-of-envelope (``bilet/olcek.mjs``) and the contention model
(``bilet/cekisme.mjs``), ported.

The contention model runs on :class:`peakproof.interleave.Scheduler`, the same scheduler
the interleaving property uses: each request is a generator that yields between its read
and its write, and the seed's LCG picks which worker steps next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator

from ..interleave import Scheduler
from .params import TicketsParams
from .common import fx, js_fixed, js_round, lcg32, table

DISCIPLINES = ("unprotected", "optimistic", "pessimistic")


# -- bilet/olcek.mjs -------------------------------------------------------------------------


def scale(p: TicketsParams) -> dict[str, Any]:
    peak = p.opening_requests / p.opening_seconds
    demand = p.opening_requests * p.items_per_request
    sellout = p.quota / (peak * p.items_per_request)
    rows = []
    for w, d in zip(p.windows, p.conversion):
        back = p.quota * (1 - d)
        rows.append({"window_s": w, "conversion": d, "sold_first_round": p.quota * d,
                     "items_back": back, "idle_item_seconds": back * w})
    conv = dict(zip(p.windows, p.conversion))
    first = p.windows[0]
    d_first, d_window = conv[first], conv[p.window]
    idle_first = p.quota * (1 - d_first) * first
    idle_window = p.quota * (1 - d_window) * p.window
    return {"peak_rps": peak, "opening_demand_items": demand, "demand_to_quota": demand / p.quota,
            "sellout_seconds": sellout, "requests_before_sellout": js_round(peak * sellout),
            "stock_table_kb": p.quota * p.record_bytes / 1e3, "reservations": p.quota / p.items_per_request,
            "windows": rows,
            "window_change": {"from_s": first, "to_s": p.window, "sold_from": p.quota * d_first,
                              "sold_to": p.quota * d_window, "extra_items": (d_window - d_first) * p.quota,
                              "idle_from": idle_first, "idle_to": idle_window,
                              "idle_ratio": idle_window / idle_first}}


# -- bilet/cekisme.mjs -----------------------------------------------------------------------


class _Row:
    """The quota row of the model: stock, version, and a lock flag (no real lock)."""

    __slots__ = ("stock", "version", "locked")

    def __init__(self, stock: int) -> None:
        self.stock, self.version, self.locked = stock, 0, False


@dataclass
class _Tally:
    sold: int = 0
    rejected: int = 0
    rejected_valid: int = 0
    conflicts: int = 0


_WAIT = object()


def _request(discipline: str, qty: int, row: _Row, t: _Tally, budget: int) -> Generator[Any, None, str]:
    """One request in the seed's step semantics: a read step, then a write step."""
    tries = 0
    while True:
        if discipline == "pessimistic":
            while row.locked:
                yield _WAIT  # a wait step: nothing progressed
            row.locked = True
        read_stock, read_version = row.stock, row.version
        yield "read"
        if read_stock < qty:  # what was read is not enough
            t.rejected += 1
            t.rejected_valid += row.stock >= qty
            if discipline == "pessimistic":
                row.locked = False
            return "rejected"
        if discipline == "optimistic" and row.version != read_version:
            t.conflicts += 1
            tries += 1
            if tries >= budget:
                t.rejected += 1
                t.rejected_valid += row.stock >= qty
                return "rejected"
            yield "conflict"  # the next step reads again
            continue
        row.stock = read_stock - qty  # a blind write of what was read, minus the order
        row.version += 1
        t.sold += qty
        if discipline == "pessimistic":
            row.locked = False
        return "sold"


def contention(p: TicketsParams, discipline: str, workers: int | None = None) -> dict[str, Any]:
    """Run the seed's contention model once; returns the row of its table."""
    if discipline not in DISCIPLINES:
        raise ValueError(f"discipline must be one of {', '.join(DISCIPLINES)}; got {discipline!r}")
    n_workers = workers or p.workers
    rnd = lcg32(p.seed)
    queue_qty = [1 if next(rnd) < p.p_single else 2 for _ in range(p.requests)]
    row, tally = _Row(p.quota), _Tally()
    queue = [("reserve", {"quantity": q}, (lambda q=q: _request(discipline, q, row, tally, p.retry_budget)))
             for q in queue_qty]
    sched = Scheduler(n_workers, queue, classify=lambda e: None, is_wait=lambda s: s is _WAIT, keep_trace=False)
    sched.run(int(next(rnd) * n_workers) for _ in iter(int, 1))
    return {"discipline": discipline, "workers": n_workers, "sold": tally.sold,
            "oversell": max(0, tally.sold - p.quota), "stock_left": row.stock, "conflicts": tally.conflicts,
            "rejected": tally.rejected, "rejected_valid": tally.rejected_valid, "wait_steps": sched.wait_steps,
            "total_steps": sched.steps}


def compute(p: TicketsParams | None = None) -> dict[str, Any]:
    p = p or TicketsParams()
    runs = {d: contention(p, d) for d in DISCIPLINES}
    u, o, s = runs["unprotected"], runs["optimistic"], runs["pessimistic"]
    by_workers = []
    for n in p.worker_counts:
        a = runs["optimistic"] if n == p.workers else contention(p, "optimistic", n)
        b = runs["pessimistic"] if n == p.workers else contention(p, "pessimistic", n)
        by_workers.append({"workers": n, "optimistic_conflicts": a["conflicts"],
                           "optimistic_valid_rejections": a["rejected_valid"], "pessimistic_wait_steps": b["wait_steps"]})
    return {"params": p.describe(), "scale": scale(p), "contention": list(runs.values()),
            "derived": {"unprotected_sold_to_quota": u["sold"] / p.quota,
                        "unprotected_oversell_pct_of_quota": 100 * u["oversell"] / p.quota,
                        "optimistic_oversell": o["oversell"], "optimistic_conflicts": o["conflicts"],
                        "optimistic_valid_rejections": o["rejected_valid"],
                        "pessimistic_oversell": s["oversell"], "pessimistic_valid_rejections": s["rejected_valid"],
                        "pessimistic_to_optimistic_steps": s["total_steps"] / o["total_steps"]},
            "by_workers": by_workers}


def render(r: dict[str, Any]) -> str:
    p, sc, d = r["params"], r["scale"], r["derived"]
    wc = sc["window_change"]
    out = ["Case T, tickets: back-of-envelope (bilet/olcek.mjs)",
           f"  peak requests/s                 {sc['peak_rps']:,.0f}",
           f"  opening demand                  {fx(sc['opening_demand_items'], 0)} items",
           f"  demand / quota                  {js_fixed(sc['demand_to_quota'], 1)}x",
           f"  quota gone after                {js_fixed(sc['sellout_seconds'], 3)} s at peak rate",
           f"  requests before it is gone      {sc['requests_before_sellout']:,}",
           f"  stock table                     {js_fixed(sc['stock_table_kb'], 1)} KB",
           f"  reservations                    {fx(sc['reservations'], 0)} (quota / items per request)", "",
           table(["window", "conversion", "sold in first round", "items back", "idle item-seconds"],
                 [[f"{w['window_s']} s", js_fixed(w["conversion"], 2), fx(w["sold_first_round"], 0),
                   fx(w["items_back"], 0), fx(w["idle_item_seconds"], 0)] for w in sc["windows"]]), "",
           f"  window {wc['from_s']} s -> {wc['to_s']} s: sold in first round {fx(wc['sold_from'], 0)} -> "
           f"{fx(wc['sold_to'], 0)} (+{fx(wc['extra_items'], 0)} items); idle item-seconds "
           f"{fx(wc['idle_from'], 0)} -> {fx(wc['idle_to'], 0)} ({js_fixed(wc['idle_ratio'], 2)}x)", "",
           f"Contention model (bilet/cekisme.mjs): quota {p['quota']:,}, {p['workers']} workers, "
           f"{p['requests']:,} requests, retry budget {p['retry_budget']}, seed {p['seed']}",
           table(["discipline", "sold", "oversell", "stock left", "conflicts", "rejected (valid)", "wait steps",
                  "total steps"],
                 [[c["discipline"], f"{c['sold']:,}", f"{c['oversell']:,}", f"{c['stock_left']:,}",
                   f"{c['conflicts']:,}", f"{c['rejected']:,} ({c['rejected_valid']:,})", f"{c['wait_steps']:,}",
                   f"{c['total_steps']:,}"] for c in r["contention"]]), "",
           f"  unprotected sold {js_fixed(d['unprotected_sold_to_quota'], 3)}x the quota; oversell / quota = "
           f"{js_fixed(d['unprotected_oversell_pct_of_quota'], 2)}%",
           f"  optimistic: oversell {d['optimistic_oversell']:,}, {d['optimistic_conflicts']:,} conflicts, "
           f"{d['optimistic_valid_rejections']:,} valid requests rejected when the retry budget ran out",
           f"  pessimistic: oversell {d['pessimistic_oversell']:,}, valid rejections "
           f"{d['pessimistic_valid_rejections']:,}, {js_fixed(d['pessimistic_to_optimistic_steps'], 2)}x the "
           f"steps of optimistic", "",
           table(["concurrent workers", "optimistic conflicts", "valid rejections", "pessimistic wait steps"],
                 [[str(b["workers"]), f"{b['optimistic_conflicts']:,}", f"{b['optimistic_valid_rejections']:,}",
                   f"{b['pessimistic_wait_steps']:,}"] for b in r["by_workers"]], first_left=False)]
    return "\n".join(out)
