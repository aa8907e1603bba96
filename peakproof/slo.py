"""Service-level thresholds: parsed from options, judged at the end of a run over a history.

Syntax: ``OP:STAT<=LIMIT[@BASIS]``, e.g. ``reserve:p99<=100ms`` (the seed's decision
threshold), ``reserve:mean<=0.05s@send``. STAT is p50, p90, p95, p99, p99.9, mean or max;
BASIS is ``intended`` (default: latency from the instant the arrival curve meant the
request to start, free of coordinated omission) or ``send`` (from the actual send).
Every completed operation counts, info ones (timeouts) included: a decision that did not
come in time is a slow decision, not a missing one.

Error budgets: ``errors:rate<=0.1%`` (the default of every load scenario) judges, per
operation kind, the share of operations that ended in an error: *info* (a 5xx, timeout,
reset or an answer not of the contract's shape) or a refused connection. Refusals the
contract allows (sold out, 409 contention, 429 with Retry-After) are definite *fail*
answers: counted and shown, never errors.

One percentile rule (nearest rank, :func:`statistic`) for the judged figures and the
charted ones alike.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from .driver import SIDE
from .checks import CheckResult, Measure
from .errors import UsageError
from .history import Op

SETUP = "setup"  # the process of a scenario's set-up calls (judged by the scenario, not the error budget)

_ERRORS = re.compile(r"^\s*errors:rate\s*<=\s*(?P<num>\d+(?:\.\d+)?)\s*%\s*$")
DEFAULT_ERROR_BUDGET = "errors:rate<=0.1%"
_SLO = re.compile(r"^\s*(?P<op>[\w.-]+):(?P<stat>p\d+(?:\.\d+)?|mean|max)\s*<=\s*(?P<num>\d+(?:\.\d+)?)"
                  r"\s*(?P<unit>ms|s)?\s*(?:@(?P<basis>intended|send))?\s*$")


# Derived operation names a case may define (e.g. the feed's ``first_page``: a read without a
# cursor), so an SLO can name a kind of request narrower than an op's ``f``.
OP_KINDS: dict[str, Callable[[Op], bool]] = {}


def op_kind(name: str, predicate: Callable[[Op], bool]) -> None:
    """Let ``--slo NAME:...`` judge the operations ``predicate`` accepts."""
    OP_KINDS[name] = predicate


@dataclass(frozen=True)
class Threshold:
    op: str
    stat: str
    limit: float  # seconds
    basis: str = "intended"

    @property
    def name(self) -> str:
        return f"{self.op} {self.stat} latency ({self.basis})"

    def __str__(self) -> str:
        return f"{self.op}:{self.stat}<={self.limit * 1000:g}ms@{self.basis}"

    def judge(self, ops: Iterable[Op]) -> CheckResult:
        return self.judge_samples(Latencies.of(ops, self.op, self.basis))

    def judge_samples(self, lat: "Latencies", what: str | None = None) -> CheckResult:
        """The threshold over recorded latencies (``what``: what a sample is, for the messages)."""
        what = what or f"completed {self.op} operations"
        limit = Measure(self.limit, "s", "<=")
        if not lat.values:
            return CheckResult(self.name, "unknown", {"samples": 0}, note=f"no {what} to judge", chances=0,
                               chance_kind=what, limit=limit)
        actual = lat.statistic(self.stat)
        ok = actual <= self.limit
        m = Measure(actual, "s")
        return CheckResult(self.name, ok, {"samples": len(lat.values)},
                           None if ok else f"Actual {m.render()} / Limit {Measure(self.limit, 's').render()} "
                                           f"({self.stat} of {len(lat.values):,} {what}, from {self.basis})",
                           chances=len(lat.values), chance_kind=what, actual=m, limit=limit)


@dataclass(frozen=True)
class ErrorBudget:
    """At most ``limit`` (a share) of each operation kind's completions may be errors."""

    limit: float
    op: str = "errors"

    @property
    def name(self) -> str:
        return "error budget"

    def __str__(self) -> str:
        return f"errors:rate<={self.limit * 100:g}%"

    def judge(self, ops: Iterable[Op], contended: str | None = None) -> CheckResult:
        """The budget over ``ops``. ``contended``: why the run's CPU was not its own (a neighbour took CPU it
        needed, :func:`peakproof.contention.contention`), or None. A timeout is a time judgement like a
        latency: a budget that only the timeouts broke, while it was contended, is not decided; one the
        other errors break alone is a FAIL whatever the neighbours did."""
        by_kind: dict[str, list[int]] = {}  # f -> [completed, errors, timeouts]
        codes: dict[str, int] = {}
        refusals: dict[str, int] = {}
        for op in ops:
            if not op.done or op.process in (SIDE, SETUP):  # the harness's own calls are not the load: its
                continue  # observations, and the set-up (judged by the scenario: refused, or never answered)
            row = by_kind.setdefault(op.f, [0, 0, 0])
            row[0] += 1
            if is_error(op):
                row[1] += 1
                row[2] += op.value == "timeout"
                key = f"{op.f} {op.value}"
                codes[key] = codes.get(key, 0) + 1
            elif op.type == "fail":
                key = f"{op.f} {op.value}"
                refusals[key] = refusals.get(key, 0) + 1
        total = sum(r[0] for r in by_kind.values())
        errors = sum(r[1] for r in by_kind.values())
        counts = {"operations": total,
                  "errors": errors, "errors_by_kind": dict(sorted(codes.items())),
                  "allowed_refusals": dict(sorted(refusals.items()))}
        if not total:
            return CheckResult(self.name, "unknown", counts, note="no completed operations to judge",
                               chances=0, chance_kind="completed operations", limit=Measure(self.limit, "share", "<="))
        worst_kind, worst = max(((f, r[1] / r[0]) for f, r in by_kind.items()), key=lambda x: x[1])
        counts["worst_kind"] = worst_kind
        ok = worst <= self.limit
        first = None
        if not ok:
            n, e, _ = by_kind[worst_kind]
            top = sorted(((k, v) for k, v in codes.items() if k.startswith(worst_kind + " ")), key=lambda x: -x[1])[:3]
            first = (f"Actual {worst:.2%} of {n:,} {worst_kind} operations ended in an error ({e:,}: "
                     + ", ".join(f"{k.split(' ', 1)[1]} x{v:,}" for k, v in top)
                     + f") / Limit {self.limit:.2%}: the target answered 5xx, timed out, reset or answered "
                       f"off-contract")
        result = CheckResult(self.name, ok, counts, first, chances=total, chance_kind="completed operations",
                             actual=Measure(round(worst, 6), "share"), limit=Measure(self.limit, "share", "<="))
        if ok or not contended:
            return result
        # the budget without the timeouts: what the target answered wrongly, whatever the CPU did
        untimed = max((r[1] - r[2]) / r[0] for r in by_kind.values())
        if untimed > self.limit:
            return result
        timeouts = sum(r[2] for r in by_kind.values())
        counts["timeouts_while_contended"] = timeouts
        return CheckResult(self.name, "unknown", counts, first, chances=total, chance_kind="completed operations",
                           actual=Measure(round(worst, 6), "share"), limit=Measure(self.limit, "share", "<="),
                           note=f"not decided: {contended}; {timeouts:,} of the errors were timeouts (a time "
                                f"judgement, the neighbour's as much as the target's) and the budget holds without "
                                f"them ({untimed:.2%}) ({first})")


def is_error(op: Op) -> bool:
    """An error, not an answer: info (5xx, timeout, reset, off-contract body) or a refused connection."""
    return op.type == "info" or (op.type == "fail" and op.value == "connection_refused")


def no_server_errors(ops: Iterable[Op], limit: float = 0.0) -> CheckResult:
    """The properties' error budget: every request got an answer the contract allows.

    The load's rule (:class:`ErrorBudget`: per operation kind, the share of completions that were
    errors, a 5xx, a timeout, a reset or an off-contract answer) with the properties' default of
    none allowed: a property asks for little, so one error is a finding, named with its request
    and its answer. Refusals the contract allows (4xx, 503 busy) are answers. A timeout or a reset
    while a fault the run injected was in force (a nemesis window of the history) is excused:
    the fault, not the target; any other error is not, whatever was in force.
    """
    from .nemesis import NEMESIS, windows

    ops = list(ops)
    faults = [(w["start"], math.inf if w["end"] is None else w["end"], w["fault"]) for w in windows(ops)]
    by_kind: dict[str, list[int]] = {}
    errors: list[Op] = []
    excused: dict[str, int] = {}
    for op in ops:
        if not op.done or op.process in (SIDE, NEMESIS):
            continue
        row = by_kind.setdefault(op.f, [0, 0])
        row[0] += 1
        if not is_error(op):
            continue
        if op.value in ("timeout", "reset"):
            during = next((f for lo, hi, f in faults if op.invoke_time <= hi and op.complete_time >= lo), None)
            if during is not None:
                excused[during] = excused.get(during, 0) + 1
                continue
        row[1] += 1
        errors.append(op)
    total = sum(r[0] for r in by_kind.values())
    counts: dict[str, object] = {"requests": total, "errors": len(errors)}
    if excused:
        counts["excused_during_faults"] = dict(sorted(excused.items()))
    name = "no_server_errors"
    if not total:
        return CheckResult(name, "unknown", counts, note="no request completed", chances=0,
                           chance_kind="requests", limit=Measure(limit, "share", "<="))
    over = [(f, r[1] / r[0]) for f, r in by_kind.items() if r[0] and r[1] / r[0] > limit]
    if not over:
        return CheckResult(name, True, counts, chances=total, chance_kind="requests",
                           actual=Measure(round(max(r[1] / r[0] for r in by_kind.values() if r[0]), 6), "share"),
                           limit=Measure(limit, "share", "<="))
    kind, share = max(over, key=lambda x: x[1])
    first = next(op for op in errors if op.f == kind)
    args = ", ".join(f"{k}={v!r}" for k, v in first.args.items())
    text = (f"{first.f}({args}) answered {first.value}: {first.error or 'no detail'}"[:600]
            + f". Actual {share:.2%} of {by_kind[kind][0]:,} {kind} requests ended in an error "
              f"({by_kind[kind][1]:,}) / Limit {limit:.2%}: a 5xx, a timeout, a reset or an off-contract answer "
              f"to a request the contract says must succeed (--slo errors:rate<=N% sets the budget)")
    return CheckResult(name, False, {**counts, "worst_kind": kind}, text, errors[:5], chances=total,
                       chance_kind="requests", actual=Measure(round(share, 6), "share"),
                       limit=Measure(limit, "share", "<="))


def properties_error_budget(slo: Iterable[str]) -> float:
    """The error budget a property run judges by: the one ``--slo`` gives, else none allowed."""
    for t in parse_thresholds(slo):
        if isinstance(t, ErrorBudget):
            return t.limit
    return 0.0


class Latencies:
    """Latencies recorded once: the SLO judge, the charts and the report all read their
    statistics from this one structure, by the one rule of :func:`statistic`.

    ``values`` are seconds, sorted; ``by_second`` the same samples keyed by the whole second
    (from the run's start) their operation was meant to begin, for charts over time.
    Raw samples, not a histogram: a run's history is in memory anyway, and percentiles of
    raw samples are exact (nearest rank), so the chart's and the verdict's figures agree.
    """

    __slots__ = ("values", "by_second")

    def __init__(self, samples: Iterable[tuple[float, float]]) -> None:
        """``samples``: (second the operation was meant to start, latency in s)."""
        self.by_second: dict[int, list[float]] = {}
        values = []
        for sec, lat in samples:
            values.append(lat)
            self.by_second.setdefault(int(sec), []).append(lat)
        values.sort()
        self.values = values

    @classmethod
    def of(cls, ops: Iterable[Op], op: str, basis: str = "intended", t0: float = 0.0) -> "Latencies":
        """Completed operations of kind ``op`` (an ``op_kind`` name or an ``Op.f``), from the
        intended instant (``basis`` intended) or from the actual send."""
        kind = OP_KINDS.get(op)
        chosen = (o for o in ops if o.done and (kind(o) if kind else o.f == op))
        if basis == "intended":
            return cls((_start(o) - t0, o.latency_from_intended) for o in chosen)
        return cls((_start(o) - t0, o.latency) for o in chosen)

    def statistic(self, stat: str) -> float:
        return statistic(self.values, stat)

    def series(self, stat: str) -> list[tuple[float, float]]:
        """``stat`` of each second's samples (charts)."""
        return percentile_series(self.by_second, stat)


def _start(op: Op) -> float:
    return op.intended_time if op.intended_time is not None else op.invoke_time


def statistic(sorted_values: list[float], stat: str) -> float:
    if stat == "mean":
        return sum(sorted_values) / len(sorted_values)
    if stat == "max":
        return sorted_values[-1]
    q = float(stat[1:]) / 100
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]  # nearest rank


def percentile_series(by_key: dict[int, list[float]], stat: str) -> list[tuple[float, float]]:
    """``stat`` of each key's values, by the rule the SLOs are judged with (charts use this)."""
    return [(k, statistic(sorted(by_key[k]), stat)) for k in sorted(by_key) if by_key[k]]


def parse_threshold(text: str) -> "Threshold | ErrorBudget":
    e = _ERRORS.match(text)
    if e:
        return ErrorBudget(float(e["num"]) / 100)
    m = _SLO.match(text)
    if not m:
        raise UsageError("--slo", "OP:STAT<=LIMIT[ms|s][@intended|@send], e.g. reserve:p99<=100ms, or an error "
                         "budget errors:rate<=N%", text, "STAT is p50, p95, p99, p99.9, mean or max.")
    value = float(m["num"]) / (1000 if (m["unit"] or "ms") == "ms" else 1)
    return Threshold(m["op"], m["stat"], value, m["basis"] or "intended")


def parse_thresholds(texts: Iterable[str]) -> "list[Threshold | ErrorBudget]":
    return [parse_threshold(t) for text in texts for t in text.split(",") if t.strip()]


def with_error_budget(texts: Iterable[str]) -> list[str]:
    """The SLOs as given, plus the default error budget unless one of them is an error budget."""
    texts = [t for text in texts for t in text.split(",") if t.strip()]
    if not any(_ERRORS.match(t) for t in texts):
        texts.append(DEFAULT_ERROR_BUDGET)
    return texts
