"""What the reference targets' background loops do with an exception: never swallow it.

A loop (the tickets expiry supervisor, the feed's fan-out consumers, the notifications
dispatcher) that raises logs the traceback (the first few in full, then one line each),
counts it, keeps the last one, and keeps serving; ``/_stats`` (or ``/health``) reports
the counts, so a harness or an operator sees a loop that is failing instead of a target
that silently stops doing its work.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any

log = logging.getLogger("peakproof.targets")


class LoopHealth:
    """Errors of the background loops, by loop name; thread-safe."""

    FULL_TRACEBACKS = 5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.errors: dict[str, int] = {}
        self.last: dict[str, dict[str, Any]] = {}

    def failed(self, loop: str, exc: BaseException) -> None:
        with self._lock:
            n = self.errors[loop] = self.errors.get(loop, 0) + 1
            self.last[loop] = {"at": time.time(), "error": f"{type(exc).__name__}: {exc}"[:300]}
        if n <= self.FULL_TRACEBACKS:
            log.error("background loop %s raised (error %d):\n%s", loop, n,
                      "".join(traceback.format_exception(exc)))
        else:
            log.error("background loop %s raised (error %d): %s: %s", loop, n, type(exc).__name__, exc)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"loop_errors": dict(self.errors), "last_loop_error": dict(self.last)}


class BackgroundLoop:
    """Threads that run ``_loop`` until stopped: the real-time adapter around a sans-I/O core
    (the tickets expiry supervisor, the notifications dispatcher, the feed's fan-out consumers).

    ``start`` / ``stop`` / ``wake`` and the health record are the same for all; a subclass
    writes ``_loop`` (checking ``self._stop``, waiting on ``self._wake``) and, if it owns
    more (thread pools), ``_close``.
    """

    def __init__(self, name: str, threads: int = 1, health: LoopHealth | None = None) -> None:
        self.health = health or LoopHealth()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads = [threading.Thread(target=self._loop, name=name if threads == 1 else f"{name}-{i}",
                                          daemon=True) for i in range(threads)]

    def start(self) -> "BackgroundLoop":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            if t.ident is not None:  # never started (a dispatcher kept off): nothing to join
                t.join(timeout=5)
        self._close()

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        pass
