"""The counter's driver protocol, its in-process driver and its HTTP driver.

Every method records one operation in the driver's :class:`~peakproof.history.History` and
returns it completed: ok with ``{"value": v}`` (the value the call saw or left), fail (a 4xx:
certainly nothing changed) or info (unknown: a timeout, a 5xx, an answer off the contract).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol, runtime_checkable

from peakproof.clock import VirtualClock
from peakproof.driver import HttpDriver, InProcessDriver
from peakproof.history import FAIL, History, Op
from peakproof.http import json_object

from .core import CounterCore, CounterError


@runtime_checkable
class CounterDriver(Protocol):
    """The operations of the counter case (plug your own class with ``--driver module:Class``)."""

    history: History

    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def increment(self, by: int, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def read(self, *, process: Any = 0, intended_time: float | None = None) -> Op: ...


def parse_value(doc: Any) -> dict[str, int]:
    """``{"value": <int>}`` or the op is info (a body off the contract)."""
    doc = json_object(doc)
    value = doc["value"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"'value' must be a whole number; got {value!r}")
    return {"value": value}


class InProcessCounter(InProcessDriver):
    """Drives a :class:`CounterCore` directly, in virtual time (each operation takes ``step`` s)."""

    error = CounterError

    def __init__(self, core: Any = None, *, policy: str = "locked", clock: VirtualClock | None = None,
                 history: History | None = None, core_factory: Callable[[VirtualClock], Any] | None = None,
                 step: float = 0.001) -> None:
        super().__init__(clock, history)
        self.core = self._plugged(core, core_factory) or CounterCore(policy)
        self.step = step

    def increment(self, by: int, *, process: Any = 0, intended_time: float | None = None) -> Op:
        self.advance(self.step)
        return self._do("increment", {"by": by}, lambda: {"value": self.core.increment(by)}, process, intended_time)

    def read(self, *, process: Any = 0, intended_time: float | None = None) -> Op:
        self.advance(self.step)
        return self._do("read", {}, lambda: {"value": self.core.read()}, process, intended_time)

    def concurrent_increments(self, bys: list[int], *, process: str = "burst") -> list[Op]:
        """Increments that overlap: every one is invoked and begun, then each commits in turn (the
        worst interleaving for a core that loses updates)."""
        self.advance(self.step)
        ops = [self.history.invoke(f"{process}-{k}", "increment", {"by": by}) for k, by in enumerate(bys)]
        begun: list[tuple[Op, Any]] = []
        for op, by in zip(ops, bys):
            try:
                begun.append((op, self.core.begin(by)))
            except CounterError as e:
                self.history.complete(op, FAIL, e.code, e.message)
        for op, pending in begun:
            self.history.complete(op, "ok", {"value": self.core.commit(pending)})
        return ops


class HttpCounter(HttpDriver):
    """Drives the counter contract at ``base_url`` (e.g. ``http://127.0.0.1:8000/counter``)."""

    def increment(self, by: int, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("increment", {"by": by}, "POST", "/increments", {"by": by}, parse_value, process=process,
                          intended_time=intended_time)

    def read(self, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("read", {}, "GET", "", None, parse_value, process=process, intended_time=intended_time)

    def concurrent_increments(self, bys: list[int], *, process: str = "burst") -> list[Op]:
        """Increments sent at once, one thread each."""
        with ThreadPoolExecutor(max_workers=max(1, len(bys))) as pool:
            return list(pool.map(lambda kb: self.increment(kb[1], process=f"{process}-{kb[0]}"), enumerate(bys)))
