"""Histories of operations, Jepsen style.

An operation is data: who did what with which arguments, when it was meant to start,
when it was sent, when it completed, and how: ``ok`` (it happened), ``fail`` (it
certainly did not happen) or ``info`` (unknown: a timeout, a reset, a 5xx, an unparsable
answer). Every invocation and completion takes the next number of one global sequence, so
"A completed before B was invoked" is a comparison of two integers, whatever the clocks
say; times are kept for latency and for the target's own deadlines (hold expiry).

Recording is cheap (one slotted object an operation) so a 200,000-request spike is
recorded whole.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(slots=True, eq=False)
class Op:
    process: Any
    f: str
    args: dict[str, Any]
    invoke_seq: int
    invoke_time: float
    intended_time: float | None = None
    type: str = "invoke"  # then ok | fail | info
    complete_seq: int = -1
    complete_time: float = math.nan
    value: Any = None  # ok: the result; fail/info: the error code
    error: str | None = None  # human text for fail/info
    send_time: float | None = None

    @property
    def done(self) -> bool:
        return self.type != "invoke"

    @property
    def latency(self) -> float:
        """Completion minus actual send (or invoke)."""
        start = self.send_time if self.send_time is not None else self.invoke_time
        return self.complete_time - start

    @property
    def latency_from_intended(self) -> float:
        """Completion minus intended start: free of coordinated omission."""
        start = self.intended_time if self.intended_time is not None else self.invoke_time
        return self.complete_time - start

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) is not None}  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        tail = f" -> {self.type} {self.value!r}" if self.done else " (pending)"
        return f"<{self.process} {self.f}({args}){tail} #{self.invoke_seq}..{self.complete_seq}>"


# Who hears of every operation as it completes: the properties' session tallies how they ended, to say what a
# run did when a check had no chance (pytest_session). Empty outside it: nothing is paid for.
WATCHERS: list[Callable[["Op"], None]] = []


class History:
    """An append-only, thread-safe list of operations with one global sequence."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.ops: list[Op] = []
        self._seq = itertools.count()  # next() on itertools.count is atomic under the GIL

    def invoke(self, process: Any, f: str, args: dict[str, Any], intended_time: float | None = None) -> Op:
        op = Op(process, f, args, next(self._seq), self.clock(), intended_time)
        self.ops.append(op)
        return op

    def prepend(self, earlier: Iterable[Op]) -> None:
        """Put another history's ops, all done before this one began (a scenario's setup), in front.

        Their sequence numbers come from another counter: they are shifted below every
        number of this history, keeping their own order.
        """
        ops = [op for op in earlier]
        if not ops:
            return
        top = max(max(op.invoke_seq, op.complete_seq) for op in ops) + 1
        for op in ops:
            op.invoke_seq -= top
            if op.complete_seq >= 0:
                op.complete_seq -= top
        self.ops[:0] = ops

    def complete(self, op: Op, type_: str, value: Any = None, error: str | None = None) -> Op:
        op.complete_time = self.clock()
        op.complete_seq = next(self._seq)
        op.type, op.value, op.error = type_, value, error
        for watch in WATCHERS:
            watch(op)
        return op

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def of(self, *fs: str) -> list[Op]:
        return [op for op in self.ops if op.f in fs]

    def counts(self) -> dict[str, int]:
        out = {OK: 0, FAIL: 0, INFO: 0, "invoke": 0}
        for op in self.ops:
            out[op.type] += 1
        return out

    def dump(self, path: str | Path) -> None:
        """One JSON object per line, in invocation order."""
        with open(path, "w", encoding="utf-8") as fh:
            for op in self.ops:
                fh.write(json.dumps(op.to_json(), default=str) + "\n")

    @classmethod
    def from_ops(cls, ops: Iterable[Op], clock: Callable[[], float] = lambda: 0.0) -> "History":
        h = cls(clock)
        h.ops = list(ops)
        start = max((max(o.invoke_seq, o.complete_seq) for o in h.ops), default=-1) + 1
        h._seq = itertools.count(start)
        return h


@dataclass
class HandHistory:
    """Builds histories by hand for tests: ``h.ok("reserve", args, value)`` at a time.

    Each call appends a completed op (invoke and completion back to back) unless
    ``pending=True``; ``finish(op, ...)`` completes a pending one later, so concurrency
    (overlapping operations) can be written out explicitly.
    """

    history: History = field(default_factory=lambda: History(lambda: 0.0))
    now: float = 0.0

    def __post_init__(self) -> None:
        self.history.clock = lambda: self.now

    def at(self, t: float) -> "HandHistory":
        self.now = t
        return self

    def op(self, type_: str, f: str, args: dict[str, Any], value: Any = None, *, process: Any = 0,
           pending: bool = False) -> Op:
        op = self.history.invoke(process, f, dict(args))
        if not pending:
            self.history.complete(op, type_, value)
        else:
            op.value = (type_, value)  # remembered for finish()
        return op

    def ok(self, f: str, args: dict[str, Any], value: Any = None, **kw: Any) -> Op:
        return self.op("ok", f, args, value, **kw)

    def fail(self, f: str, args: dict[str, Any], code: str, **kw: Any) -> Op:
        return self.op("fail", f, args, code, **kw)

    def info(self, f: str, args: dict[str, Any], code: str = "timeout", **kw: Any) -> Op:
        return self.op("info", f, args, code, **kw)

    def finish(self, op: Op, type_: str | None = None, value: Any = None) -> Op:
        planned_type, planned_value = op.value if isinstance(op.value, tuple) else (None, None)
        return self.history.complete(op, type_ or planned_type, value if value is not None else planned_value)


_FIELDS = ("process", "f", "args", "invoke_time", "intended_time", "type", "complete_time", "value", "error",
           "send_time")


def op_to_wire(op: Op) -> list[Any]:
    """A compact, msgpack/JSON-friendly form of an op (sequence numbers are re-made on merge)."""
    return [getattr(op, k) for k in _FIELDS]


def merge_histories(parts: Iterable[Iterable[Any]], clock: Callable[[], float] = lambda: 0.0) -> History:
    """One history from several processes' ops (``Op`` objects or wire lists).

    Sequence numbers of different processes are not comparable, so every invocation and
    completion is re-numbered in the order of its wall-clock time (one machine: one
    clock). An op's invocation always precedes its completion.
    """
    ops: list[Op] = []
    for part in parts:
        for item in part:
            if isinstance(item, Op):
                ops.append(item)
            else:
                d = dict(zip(_FIELDS, item))
                op = Op(d["process"], d["f"], d["args"], 0, d["invoke_time"], d["intended_time"])
                op.type, op.complete_time, op.value, op.error = d["type"], d["complete_time"], d["value"], d["error"]
                op.send_time = d["send_time"]
                ops.append(op)
    events = []
    for i, op in enumerate(ops):
        events.append((op.invoke_time, 0, i))
        if op.type != "invoke":
            events.append((op.complete_time, 1, i))
    events.sort()
    for seq, (_, kind, i) in enumerate(events):
        if kind == 0:
            ops[i].invoke_seq = seq
        else:
            ops[i].complete_seq = seq
    ops.sort(key=lambda o: o.invoke_seq)
    return History.from_ops(ops, clock)
