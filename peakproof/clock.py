"""Clocks: virtual time for properties and replays, wall time for served targets."""

from __future__ import annotations

import time


class VirtualClock:
    """A clock that moves only when told. Calling it returns the current time."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"time only moves forward; got advance({seconds})")
        self.now += seconds
        return self.now

    def set(self, t: float) -> None:
        if t > self.now:
            self.now = t


wall_clock = time.time
