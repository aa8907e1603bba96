"""Arrival curves: the intended instant of every request, computed before the run.

An open model sends each request at its instant whatever the target does, so a slow
target cannot quietly lower the offered load (coordinated omission). A curve is a
piecewise-linear rate in requests/s; its cumulative count Λ(t) is inverted to place the
i-th arrival at Λ⁻¹(i) (uniform spacing) or at Λ⁻¹(E₁ + … + Eᵢ) with unit exponential
gaps (Poisson, seeded). Pure: no I/O, no clocks.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

from .errors import UsageError


@dataclass(frozen=True)
class Segment:
    start: float  # s from the run's start
    end: float
    rate_start: float  # requests/s at start
    rate_end: float  # requests/s at end (linear in between)

    @property
    def count(self) -> float:
        return (self.rate_start + self.rate_end) / 2 * (self.end - self.start)

    def time_at(self, k: float) -> float:
        """The instant within this segment by which k arrivals (0 <= k <= count) are due."""
        d = self.end - self.start
        r0, r1 = self.rate_start, self.rate_end
        a = (r1 - r0) / d if d else 0.0
        if abs(a) < 1e-12:
            return self.start + (k / r0 if r0 else 0.0)
        # k = r0 x + a x^2 / 2  ->  x = (-r0 + sqrt(r0^2 + 2 a k)) / a
        disc = max(0.0, r0 * r0 + 2 * a * k)
        return self.start + (-r0 + math.sqrt(disc)) / a


@dataclass(frozen=True)
class Curve:
    """A named rate curve made of linear segments."""

    name: str
    segments: tuple[Segment, ...]

    @property
    def duration(self) -> float:
        return self.segments[-1].end if self.segments else 0.0

    @property
    def total(self) -> float:
        return sum(s.count for s in self.segments)

    def rate(self, t: float) -> float:
        for s in self.segments:
            if s.start <= t < s.end:
                return s.rate_start + (s.rate_end - s.rate_start) * (t - s.start) / (s.end - s.start)
        return 0.0

    def expected_per_second(self) -> list[float]:
        """Arrivals the curve asks for in each whole second of the run."""
        seconds = math.ceil(self.duration - 1e-9)
        return [self.cumulative(min(i + 1, self.duration)) - self.cumulative(i) for i in range(seconds)]

    def cumulative(self, t: float) -> float:
        total = 0.0
        for s in self.segments:
            if t >= s.end:
                total += s.count
            elif t > s.start:
                x = t - s.start
                a = (s.rate_end - s.rate_start) / (s.end - s.start)
                total += s.rate_start * x + a * x * x / 2
        return total

    def time_of(self, k: float) -> float:
        """Λ⁻¹(k): the instant by which k arrivals are due."""
        for s in self.segments:
            c = s.count
            if k <= c:
                return s.time_at(k)
            k -= c
        return self.duration

    def scaled(self, rate_factor: float) -> "Curve":
        """The same shape at ``rate_factor`` times the rate (``--scale``)."""
        return Curve(f"{self.name} x{rate_factor:g}", tuple(
            Segment(s.start, s.end, s.rate_start * rate_factor, s.rate_end * rate_factor) for s in self.segments))


def constant(rate: float, seconds: float, name: str = "constant") -> Curve:
    _check(rate >= 0 and seconds > 0, "a constant curve", "rate >= 0 and seconds > 0", (rate, seconds))
    return Curve(name, (Segment(0.0, seconds, rate, rate),))


def arrival_times(curve: Curve, spacing: str = "uniform", seed: int = 20260730,
                  count: int | None = None) -> list[float]:
    """The intended offset (s) of every arrival, ascending.

    Uniform: ``round(total)`` arrivals at Λ⁻¹(i), i = 0, 1, ... (200,000 over 10 s at
    20,000/s are 50 µs apart, the first at 0). Poisson: exponential unit gaps in Λ.
    """
    if spacing not in ("uniform", "poisson"):
        raise UsageError("spacing", "'uniform' or 'poisson'", spacing)
    n = round(curve.total) if count is None else count
    if spacing == "uniform":
        if len(curve.segments) == 1 and curve.segments[0].rate_start == curve.segments[0].rate_end:
            seg = curve.segments[0]
            step = 1.0 / seg.rate_start if seg.rate_start else 0.0
            return [seg.start + i * step for i in range(n)]
        return [curve.time_of(i) for i in range(n)]
    rnd = random.Random(seed)
    out, k, limit = [], 0.0, curve.total
    while len(out) < n:
        k += rnd.expovariate(1.0)
        if k > limit and count is None:
            break
        out.append(curve.time_of(min(k, limit)))
    return out


def share(times: Sequence[float], workers: int, index: int) -> list[float]:
    """Worker ``index`` of ``workers`` takes every ``workers``-th arrival: together, the curve once."""
    _check(workers >= 1 and 0 <= index < workers, "a worker share", "0 <= index < workers", (index, workers))
    return list(times[index::workers])


def _check(ok: bool, what: str, expected: str, actual: object) -> None:
    if not ok:
        raise UsageError(what, expected, actual)
