"""Step concurrent operations one step at a time under a chosen schedule.

The seed's contention model (``bilet/cekisme.mjs``) has no threads: workers pull
requests from a queue and a scheduler picks which worker takes its next step, so
contention comes from other workers stepping between one worker's read and its write.
This module is that scheduler, over real code: a task is a generator (the target core's
step generators, e.g. :meth:`peakproof.targets.tickets.TicketsCore.reserve_steps`) and each
``step(worker)`` advances one worker by one yield. Hypothesis chooses the schedule, so it
can search for, and shrink, the interleaving that breaks an invariant.

Every task is recorded in a :class:`History` whose clock is the step counter, so the
same checks that judge a load run judge an interleaving.

The schedule may also carry the nemesis (:data:`LAPSE`, :func:`kill`): time jumps past every
lease in force, or a worker dies where it stands and never takes another step (a holder that
dies keeps its lock until a lease frees it). Both are recorded as fault ops of the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable

from .history import FAIL, INFO, OK, History, Op
from .nemesis import NEMESIS

Task = Callable[[], Generator[Any, None, Any]]

LAPSE = "lapse"  # schedule token: time passes every lease in force (the scheduler's ``lapse`` hook)


def kill(worker: int) -> str:
    """Schedule token: ``worker`` dies where it stands (its task never finishes, its lock is kept)."""
    return f"kill {worker}"


class Stuck(AssertionError):
    """Every live worker waits for a lock, and time passing (``lapse``) does not free it."""


@dataclass
class _Worker:
    index: int
    op: Op | None = None
    gen: Generator[Any, None, Any] | None = None
    last: Any = None


@dataclass
class Scheduler:
    """Workers take tasks from ``queue`` (f, args, task) in order; ``step`` advances one.

    ``classify(exc)`` maps an exception raised by a task to (type, value) for the history
    (``None`` re-raises it: a bug, not an outcome). A step that yields an object for which
    ``is_wait`` is true made no progress (a busy lock) and is counted as a wait step.
    """

    workers: int
    queue: list[tuple[str, dict[str, Any], Task]]
    classify: Callable[[BaseException], tuple[str, Any] | None]
    is_wait: Callable[[Any], bool] = lambda step: False
    keep_trace: bool = True  # a line per step; off for long model runs
    lapse: Callable[[], None] | None = None  # moves the tasks' clock past every lease (LAPSE; when stuck)
    history: History = field(init=False)
    trace: list[str] = field(default_factory=list)
    steps: int = 0
    wait_steps: int = 0

    def __post_init__(self) -> None:
        self.history = History(lambda: float(self.steps))
        self._workers = [_Worker(i) for i in range(self.workers)]
        self._next = 0
        self.dead: dict[int, _Worker] = {}  # their generators are kept: a dead holder never releases

    @property
    def busy(self) -> bool:
        live = [w for w in self._workers if w.index not in self.dead]
        return bool(live) and (self._next < len(self.queue) or any(w.gen is not None for w in live))

    def apply(self, token: int | str) -> None:
        """One schedule entry: a worker's step, or a fault of the nemesis (:data:`LAPSE`, :func:`kill`)."""
        if isinstance(token, int):
            self.step(token)
        elif token == LAPSE:
            self.steps += 1
            self._fault("lease_lapse", {})
            if self.lapse is not None:
                self.lapse()
            if self.keep_trace:
                self.trace.append(f"step {self.steps}: time passes every lease in force")
        elif token.startswith("kill "):
            w = self._workers[int(token.split()[1]) % self.workers]
            if w.index in self.dead:
                return
            self.steps += 1
            self.dead[w.index] = w
            self._fault("worker_dies", {"worker": w.index})
            if w.op is not None:  # its outcome is unknown to its client: info, forever
                self.history.complete(w.op, INFO, "died")
            if self.keep_trace:
                doing = f" in {w.op.f}{_args(w.op)}" if w.op is not None else ""
                self.trace.append(f"step {self.steps}: worker {w.index} dies{doing}")
        else:
            raise ValueError(f"schedule entries are worker numbers, {LAPSE!r} or kill(n); got {token!r}")

    def _fault(self, name: str, params: dict[str, Any]) -> None:
        op = self.history.invoke(NEMESIS, "fault_start", {"fault": name, **params})
        self.history.complete(op, OK)

    def step(self, worker: int) -> None:
        """Advance ``worker`` by one step (taking the next task if it is idle)."""
        w = self._workers[worker % self.workers]
        if w.index in self.dead:
            return
        self.steps += 1
        if w.gen is None:
            if self._next >= len(self.queue):
                return
            f, args, task = self.queue[self._next]
            self._next += 1
            w.op = self.history.invoke(w.index, f, args)
            w.gen = task()
            first = True
        else:
            first = False
        try:
            w.last = next(w.gen) if first else w.gen.send(None)
        except StopIteration as stop:
            self._finish(w, OK, stop.value)
            return
        except Exception as exc:  # noqa: BLE001 - classified, or re-raised as a bug
            outcome = self.classify(exc)
            if outcome is None:
                raise
            self._finish(w, *outcome)
            return
        if self.is_wait(w.last):
            self.wait_steps += 1
            if self.keep_trace:
                self.trace.append(f"step {self.steps}: worker {w.index} waits for the lock")
        elif self.keep_trace:
            self.trace.append(f"step {self.steps}: worker {w.index} {_describe(w.op, w.last)}")

    def _finish(self, w: _Worker, type_: str, value: Any) -> None:
        assert w.op is not None
        self.history.complete(w.op, type_, value)
        if self.keep_trace:
            shown = value if type_ != OK else _brief(value)
            self.trace.append(f"step {self.steps}: worker {w.index} {w.op.f}{_args(w.op)} -> {type_} {shown}")
        w.gen, w.op = None, None

    def run(self, schedule: Iterable[int], max_steps: int = 100_000) -> History:
        """Follow ``schedule``, then finish without adding any interleaving of its own.

        After the schedule, each busy worker runs on, lowest index first, until its task
        ends or it must wait for a lock (then the next one runs); the tasks still queued
        run one at a time. So every overlap in the history is one the schedule chose, and a
        shrunk schedule is the whole story of a failure.
        """
        for token in schedule:
            if not self.busy:
                break
            self.apply(token)
        live = [w for w in self._workers if w.index not in self.dead]
        stuck = 0
        while self.busy:
            running = [w for w in live if w.gen is not None]
            if running:
                progressed = self._run_on(running, max_steps)
            else:  # the tasks still queued run one at a time
                self._guard(max_steps)
                self.step(live[0].index)
                progressed = live[0].gen is None or not self.is_wait(live[0].last)
            stuck = 0 if progressed else stuck + 1
            if stuck == 1 and self.lapse is not None:
                self.apply(LAPSE)  # the waiters' time runs on, as it would for real
            elif stuck > 1:
                raise Stuck(f"workers {', '.join(str(w.index) for w in live if w.gen is not None)} wait for a lock "
                            f"forever: time passed every lease and it was still held"
                            + (f" (dead: workers {', '.join(map(str, sorted(self.dead)))})" if self.dead else ""))
        return self.history

    def _run_on(self, workers: list[_Worker], max_steps: int) -> bool:
        """Each worker, lowest index first, runs until its task ends or it must wait. True: one progressed."""
        progressed = False
        for w in workers:
            while w.gen is not None:
                self._guard(max_steps)
                self.step(w.index)
                if w.gen is not None and self.is_wait(w.last):
                    break
                progressed = True
        return progressed

    def _guard(self, max_steps: int) -> None:
        if self.steps >= max_steps:
            raise RuntimeError(f"still busy after {max_steps} steps: a livelock in the tasks?")

    def render(self) -> str:
        return "\n".join(self.trace)


def _args(op: Op) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in op.args.items()) + ")"


def _describe(op: Op | None, step: Any) -> str:
    label = step if isinstance(step, str) else type(step).__name__
    return f"{op.f if op else '?'}{_args(op) if op else ''}: {label}"


def _brief(value: Any) -> Any:
    if isinstance(value, tuple) and value:
        value = value[0]
    for attr in ("reservation_id", "status"):
        if hasattr(value, attr):
            return {a: getattr(value, a) for a in ("reservation_id", "quantity", "status") if hasattr(value, a)}
    return value


__all__ = ["Scheduler", "FAIL", "INFO", "OK"]
