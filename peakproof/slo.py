"""Service-level thresholds: parsed from options, judged at the end of a run over a history.

Syntax: ``OP:STAT<=LIMIT[@BASIS]``, e.g. ``reserve:p99<=100ms`` (the seed's decision
threshold), ``reserve:mean<=0.05s@send``. STAT is p50, p90, p95, p99, p99.9, mean or max;
BASIS is ``intended`` (default: latency from the instant the arrival curve meant the
request to start, free of coordinated omission) or ``send`` (from the actual send).
Every completed operation counts, info ones (timeouts) included: a decision that did not
come in time is a slow decision, not a missing one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from .checks import CheckResult
from .errors import UsageError
from .history import Op

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
        kind = OP_KINDS.get(self.op)
        lat = sorted(op.latency_from_intended if self.basis == "intended" else op.latency
                     for op in ops if (kind(op) if kind else op.f == self.op) and op.done)
        if not lat:
            return CheckResult(self.name, "unknown", {"samples": 0, "limit_ms": self.limit * 1000},
                               note=f"no completed {self.op} operations to judge")
        actual = statistic(lat, self.stat)
        ok = actual <= self.limit
        return CheckResult(self.name, ok, {"actual_ms": round(actual * 1000, 3), "limit_ms": self.limit * 1000,
                                           "samples": len(lat)},
                           None if ok else f"Actual {actual * 1000:,.1f} ms / Limit {self.limit * 1000:,.1f} ms "
                                           f"({self.stat} of {len(lat):,} {self.op} operations, from {self.basis})")


def statistic(sorted_values: list[float], stat: str) -> float:
    if stat == "mean":
        return sum(sorted_values) / len(sorted_values)
    if stat == "max":
        return sorted_values[-1]
    q = float(stat[1:]) / 100
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]  # nearest rank


def parse_threshold(text: str) -> Threshold:
    m = _SLO.match(text)
    if not m:
        raise UsageError("--slo", "OP:STAT<=LIMIT[ms|s][@intended|@send], e.g. reserve:p99<=100ms", text,
                         "STAT is p50, p95, p99, p99.9, mean or max.")
    value = float(m["num"]) / (1000 if (m["unit"] or "ms") == "ms" else 1)
    return Threshold(m["op"], m["stat"], value, m["basis"] or "intended")


def parse_thresholds(texts: Iterable[str]) -> list[Threshold]:
    return [parse_threshold(t) for text in texts for t in text.split(",") if t.strip()]
