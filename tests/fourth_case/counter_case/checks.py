"""The counter's promises, as pure functions of a history; each counts its chances to fail.

An *observation* is an ok ``read`` or an ok ``increment`` (it answers the value it left).

* :func:`counter_never_goes_back`: an observation never shows less than one that completed
  before it was invoked (reads are monotonic).
* :func:`every_increment_counted`: every observation lies between the baseline plus the ok
  increments that completed before it was invoked (they must be in it; an increment always
  includes itself) and the baseline plus every increment, ok or unknown (info, or still
  pending), invoked before it completed (they may be in it). Failed increments (4xx)
  certainly did not happen and count in neither. A read after all increments is the case
  the promise is usually stated for: it equals the sum of the ok increments, plus at most
  the unknown ones.

The baseline is the last ok read completed before the first increment was invoked, or
``initial`` (an in-process core starts at 0); with neither, the promise is "unknown".

Each check is a function of one :class:`CounterHistory` and registers itself on :data:`COUNTER`
(:class:`peakproof.checks.CheckRegistry`), as the built-in cases' checks do: the case's list of
checks is what registered, in the order written.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from peakproof.checks import CheckRegistry, CheckResult, Violations
from peakproof.history import FAIL, INFO, OK, History, Op

OBSERVING = ("read", "increment")


def _value(op: Op) -> int | None:
    v = op.value.get("value") if isinstance(op.value, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _by(op: Op) -> int:
    by = op.args.get("by")
    return by if isinstance(by, int) and not isinstance(by, bool) and by > 0 else 0


def observations(history: History) -> list[Op]:
    return [op for op in history.ops if op.type == OK and op.f in OBSERVING and _value(op) is not None]


@dataclass(frozen=True)
class CounterHistory:
    """What the counter's checks judge: the history, and the counter's initial value when known."""

    history: History
    initial: int | None = None


COUNTER: CheckRegistry[CounterHistory] = CheckRegistry("counter")


@COUNTER.register
def counter_never_goes_back(a: CounterHistory) -> CheckResult:
    """Reads are monotonic: nothing observed after an observation completed is smaller than it."""
    obs = observations(a.history)
    by_complete = sorted(obs, key=lambda o: o.complete_seq)
    v = Violations()
    chances, j, best = 0, 0, None
    for op in sorted(obs, key=lambda o: o.invoke_seq):
        while j < len(by_complete) and by_complete[j].complete_seq < op.invoke_seq:
            if best is None or _value(by_complete[j]) > _value(best):  # type: ignore[operator]
                best = by_complete[j]
            j += 1
        if best is None:
            continue
        chances += 1
        if _value(op) < _value(best):  # type: ignore[operator]
            v.add(f"{op.f} #{op.invoke_seq} saw {_value(op)} after {best.f} #{best.invoke_seq} had seen "
                  f"{_value(best)}: the counter went back", (best, op))
    return v.result("counter_never_goes_back", {"observations": len(obs)}, chances=chances,
                    chance_kind="observations after an earlier one completed")


@COUNTER.register
def every_increment_counted(a: CounterHistory) -> CheckResult:
    """Every ok increment is in every later observation; nothing is counted that nobody asked for."""
    history, initial = a.history, a.initial
    name = "every_increment_counted"
    incs = [op for op in history.ops if op.f == "increment"]
    counted = sorted((op for op in incs if op.type == OK), key=lambda o: o.complete_seq)
    maybe = sorted((op for op in incs if op.type in (OK, INFO, "invoke")), key=lambda o: o.invoke_seq)
    counts: dict[str, Any] = {"increments ok": len(counted), "increments unknown": len(maybe) - len(counted),
                              "increments refused": sum(1 for op in incs if op.type == FAIL)}
    first = min((op.invoke_seq for op in maybe), default=None)
    before = [op for op in history.ops if op.f == "read" and op.type == OK and _value(op) is not None
              and (first is None or op.complete_seq < first)]
    base = _value(max(before, key=lambda o: o.complete_seq)) if before else initial
    if base is None:
        return CheckResult(name, "unknown", counts, note="no read before the first increment and no known "
                           "initial value: nothing to count from", chances=0, chance_kind="observations")
    counts["baseline"] = base
    lo_seqs = [op.complete_seq for op in counted]
    lo_sums = [0, *accumulate(_by(op) for op in counted)]
    hi_seqs = [op.invoke_seq for op in maybe]
    hi_sums = [0, *accumulate(_by(op) for op in maybe)]
    v = Violations()
    chances = 0
    last: Op | None = None
    for op in observations(history):
        own = _by(op) if op.f == "increment" else 0
        n_lo = bisect_left(lo_seqs, op.invoke_seq)
        low = base + lo_sums[n_lo] + own
        high = base + hi_sums[bisect_left(hi_seqs, op.complete_seq)]
        if n_lo or own:
            chances += 1
        value = _value(op)
        assert value is not None
        if value < low:
            v.add(f"{op.f} #{op.invoke_seq} saw {value}, but the baseline {base} plus the ok increments it must "
                  f"include come to {low}: {low - value} lost", op)
        elif value > high:
            v.add(f"{op.f} #{op.invoke_seq} saw {value}, above the baseline {base} plus every increment invoked "
                  f"before it completed ({high}): {value - high} counted that nobody asked for", op)
        if op.f == "read" and (last is None or op.invoke_seq > last.invoke_seq):
            last = op
    if last is not None:
        counts["last read"] = _value(last)
    counts["sum of ok increments"] = lo_sums[-1]
    return v.result(name, counts, chances=chances, chance_kind="observations that must include an ok increment")


COUNTER_CHECKS = tuple(COUNTER)


def check_counter(history: History, initial: int | None = None) -> list[CheckResult]:
    """Every promise of the counter over one history."""
    return COUNTER.run(CounterHistory(history, initial))
