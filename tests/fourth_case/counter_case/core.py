"""The counter's reference core: pure (no I/O, no clock of its own), safe to share between threads.

Two policies, the first the default:

* ``locked``: an increment reads and writes the value under one lock; no update is lost.
* ``racy``: an increment takes a snapshot of the value when it begins and writes
  ``snapshot + by`` when it commits, without holding anything in between. Two increments
  that overlap both start from the same snapshot, and one of them is lost. A served app
  yields between :meth:`CounterCore.begin` and :meth:`CounterCore.commit`; the in-process
  driver interleaves them explicitly (``concurrent_increments``).

Refusals are :class:`CounterError` (status, code, message), the shape the app answers in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

POLICIES = ("locked", "racy")
MAX_BY = 1_000_000  # the largest increment the contract accepts


class CounterError(Exception):
    """A refusal: ``status`` (4xx: certainly nothing changed), ``code`` and a one-line ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Pending:
    """An increment begun and not yet committed: ``base`` is the racy policy's snapshot (None: locked)."""

    by: int
    base: int | None


def validate_by(by: Any) -> int:
    if isinstance(by, bool) or not isinstance(by, int) or not 1 <= by <= MAX_BY:
        raise CounterError(400, "invalid_by", f"'by' must be a whole number from 1 to {MAX_BY:,}; got {by!r}")
    return by


class CounterCore:
    """One counter, starting at ``start``."""

    def __init__(self, policy: str = "locked", start: int = 0) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        self.policy = policy
        self.value = start
        self.commits = 0
        self._lock = threading.Lock()

    def begin(self, by: Any) -> Pending:
        """Validate an increment and, under ``racy``, take its snapshot."""
        by = validate_by(by)
        return Pending(by, self.value if self.policy == "racy" else None)

    def commit(self, pending: Pending) -> int:
        """Apply a begun increment; returns the value it left."""
        with self._lock:
            if pending.base is None:
                self.value += pending.by
            else:  # racy: whatever committed since the snapshot is overwritten
                self.value = pending.base + pending.by
            self.commits += 1
            return self.value

    def increment(self, by: Any) -> int:
        return self.commit(self.begin(by))

    def read(self) -> int:
        return self.value
