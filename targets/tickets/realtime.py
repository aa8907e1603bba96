"""The tickets core's real-time adapter: runs its step generators on threads, in real time.

The core (:mod:`peakproof.targets.tickets.core`) decides and never waits. Served, many threads share
one core; a request that finds the quota row's lock busy waits here, on a condition every
release of a lock notifies, up to ``lock_wait_seconds`` of monotonic time (then it is
refused with :class:`~peakproof.targets.tickets.core.Busy` and nothing changed), and an injected
stall sleeps here. This is the one place of the tickets target that reads a clock of its own
(``time.monotonic``, to bound a wait); the decisions use only the core's injected clock.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .core import DEFAULT_LEASE_SECONDS, Busy, Stall, Steps, TicketsCore, Wait


class RealTimeRunner:
    """A core's runner in real time: ``TicketsCore(..., runner=r, on_release=r.released)``."""

    def __init__(self, lease_seconds: float, lock_wait_seconds: float = 5.0) -> None:
        self.lease_seconds = lease_seconds
        self.lock_wait_seconds = lock_wait_seconds
        self._released = threading.Condition(threading.Lock())

    def released(self) -> None:
        """A quota lock was released: waiters try again."""
        with self._released:
            self._released.notify_all()

    def __call__(self, steps: Steps) -> object:
        deadline = None
        try:
            step = next(steps)
            while True:
                if isinstance(step, Wait):
                    now = time.monotonic()
                    deadline = deadline or now + self.lock_wait_seconds
                    if now >= deadline:
                        steps.close()
                        raise Busy(f"waited {self.lock_wait_seconds:.2f} s for the quota lock; try again")
                    with self._released:
                        if step.lock.held_by is not None:
                            self._released.wait(min(0.05, self.lease_seconds, deadline - now))
                elif isinstance(step, Stall):
                    time.sleep(step.seconds)
                step = steps.send(None)
        except StopIteration as stop:
            return stop.value


def realtime_core(store: Any, clock: Callable[[], float], **options: Any) -> TicketsCore:
    """A core many threads share in real time: its lock waits and stalls are real."""
    runner = RealTimeRunner(options.get("lease_seconds", DEFAULT_LEASE_SECONDS), options.pop("lock_wait_seconds", 5.0))
    return TicketsCore(store, clock, runner=runner, on_release=runner.released, **options)
