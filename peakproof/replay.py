"""Replay a witness (``peakproof.witness``) against a live target (``peakproof replay``: ``replay_cli``).

A replay sends the witness's steps again on fresh ids (every name the harness chose gets a new
suffix; every id the target handed back is mapped to the one it hands back this time), setup
steps first and one by one, then the others each at its own start time (threads: what made them
concurrent is their overlap) or, once the shrink found it enough, one after the other. The
case's own checks judge the replay's history: the witness *reproduces* when the same check
fails again. ``peakproof.shrink`` makes it smaller while it does. A case takes part through a
:class:`~peakproof.witness.CaseWitness` (``peakproof/cases/<case>/witness.py``).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .checks import CheckResult
from .driver import SIDE
from .history import OK, History, Op
from .witness import CaseWitness, Step, Witness, curl_line

if TYPE_CHECKING:
    from .case import Case
    from .run import Run

NEED = (2, 4)  # a shrink candidate must fail again in 2 of 4 tries
TRIES = 10  # the final estimate
MAX_STEPS = 2000  # a window longer than this is cut to its last steps before the violation
POOL = 64  # threads that send a concurrent replay's steps, each at its own start
WAIT_FOR_ID = 10.0  # s a step waits for the step whose answer names its id


def steps_of(ops: Iterable[Op], setup: tuple[str, ...], limit: int = MAX_STEPS) -> tuple[list[Step], int]:
    """Operations as steps: setup ones first, the rest timed from the first of them; cut to the last
    ``limit`` when longer. Also the size as found."""
    ops = sorted((o for o in ops if o.process != SIDE), key=lambda o: o.invoke_seq)  # never the harness's own calls
    firsts = [o for o in ops if o.f in setup]
    rest = [o for o in ops if o.f not in setup]
    found = len(firsts) + len(rest)
    rest = rest[-limit:]
    t0 = min((_start(o) for o in rest), default=0.0)
    out = [_step(o, 0.0, True) for o in firsts] + [_step(o, max(0.0, _start(o) - t0), False) for o in rest]
    return out, found


def _start(op: Op) -> float:
    return op.intended_time if op.intended_time is not None else op.invoke_time


def _step(op: Op, at: float, setup: bool) -> Step:
    took = op.complete_time - op.invoke_time if op.done else None
    return Step(str(op.process), op.f, dict(op.args), round(at, 6), op.type, op.value,
                None if took is None or took != took else round(took, 6), setup)


# -- one replay -------------------------------------------------------------------------------------------------


@dataclass
class Try:
    reproduced: bool
    result: CheckResult | None
    ops: list[Op] = field(default_factory=list)
    curl: list[str] = field(default_factory=list)
    by_step: list[Op | None] = field(default_factory=list)  # the operation each step sent (None: not sent)


class Recording:
    """A transport that keeps each request as a curl line (for a sequential witness)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.lines = inner, []  # type: ignore[var-annotated]

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> Any:
        self.lines.append(curl_line(method, url, headers, body))
        return self.inner(method, url, body, headers, name)


class Replayer:
    """Sends steps to a target through the run's driver and judges each try by the case's check."""

    def __init__(self, hooks: CaseWitness, run: "Run", check: str, state: dict[str, Any] | None = None) -> None:
        spec = run.spec
        self.hooks, self.spec, self.check, self.timeout = hooks, spec, check, spec.request_timeout
        self.state = state or {}
        self.make_driver = _driver_factory(run)
        self.tries = 0
        self.sequential = False  # the mode the shrink found enough (its candidates are tried so)
        self.stop_at: float | None = None  # time.monotonic() after which a try sends no more steps (its bound)
        self._tag = secrets.token_hex(2)

    def once(self, steps: list[Step], sequential: bool, record: bool = False) -> Try:
        from .http import RequestsTransport

        self.tries += 1
        tag = f"rp{self._tag}{self.tries}"  # the replay's mark on every name it chooses
        history = History(time.time)
        http = RequestsTransport(None, self.timeout)  # a session of its own, closed when the try is judged
        transport: Any = Recording(http) if record else http
        driver = self.make_driver(history, transport)
        ids: dict[tuple[str, str], Any] = {}
        done = [threading.Event() for _ in steps]
        sent: list[Op | None] = [None] * len(steps)
        sent_args: dict[int, dict[str, Any]] = {}
        deps = _dependencies(steps, self.hooks.produced)
        lock = threading.Lock()

        def send(i: int, intended: float | None) -> None:
            for j in deps[i]:
                done[j].wait(WAIT_FOR_ID)
            step = steps[i]
            if self.stop_at is not None and time.monotonic() > self.stop_at:  # the replay's bound: send no more
                done[i].set()
                return
            with lock:
                args = _renamed(step.args, self.hooks.fresh, self.hooks.produced, ids, tag)
            if args is not None:
                args = self.hooks.rewrite(step, args, tag, self.state)
                sent_args[i] = args
            if args is None:  # an id this try was not handed: sending the found one would touch the run's data
                done[i].set()
                return
            try:
                op = self.hooks.send(driver, step, args, f"replay-{step.process}", intended)
            except Exception:  # noqa: BLE001 - a driver that raised: the step's outcome is unknown
                op = None
            sent[i] = op
            if op is not None and op.type == OK:
                with lock:
                    _learn(step.answer, op.value, self.hooks.produced, ids)
            done[i].set()

        setup = [i for i, s in enumerate(steps) if s.setup]
        rest = [i for i, s in enumerate(steps) if not s.setup]
        for i in setup:
            send(i, None)
        self.hooks.prepare(self.spec, self.state, [sent_args[i] for i in setup if i in sent_args])
        if sequential:  # one after the other, none before its own start (a hold must lapse before its confirm)
            start = time.time()
            for i in sorted(rest, key=lambda i: steps[i].at):
                time.sleep(max(0.0, start + steps[i].at - time.time()))
                send(i, None)
        else:  # each at its own start, by a pool of threads (enough for any overlap a witness needs)
            start = time.time() + 0.05
            queue = iter(sorted(rest, key=lambda i: steps[i].at))

            def worker() -> None:
                while True:
                    with lock:
                        i = next(queue, None)
                    if i is None:
                        return
                    due = start + steps[i].at
                    time.sleep(max(0.0, due - time.time()))
                    send(i, due)

            threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(POOL, len(rest)))]
            for t in threads:
                t.start()
            limit = time.time() + max((steps[i].at for i in rest), default=0) + (self.timeout + WAIT_FOR_ID) * (
                1 + len(rest) // POOL) + 1
            for t in threads:
                t.join(max(0.0, limit - time.time()))
        try:
            result = next((r for r in self.hooks.checks(driver, list(history.ops), self.spec)
                           if r.name == self.check), None)
        finally:
            http.session.close()
        return Try(result is not None and result.valid is False, result, list(history.ops),
                   transport.lines if record else [], sent)

    def holds(self, steps: list[Step], sequential: bool, deadline: float, need: tuple[int, int] = NEED) -> bool:
        """Does ``steps`` fail the check again in ``need[0]`` of ``need[1]`` tries? Raises OutOfTime."""
        k, n = need
        got = 0
        for i in range(n):
            if time.monotonic() > deadline:
                raise OutOfTime
            got += self.once(steps, sequential).reproduced
            if got >= k:
                return True
            if got + (n - i - 1) < k:
                return False
        return False


class OutOfTime(Exception):
    pass


def _leaves(v: Any, produced: dict[str, str], out: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """(argument, id) for each id an answer holds under a produced field."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k in produced and isinstance(x, (str, int)) and not isinstance(x, bool):
                out.add((produced[k], str(x)))
            else:
                _leaves(x, produced, out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _leaves(x, produced, out)
    return out


def _dependencies(steps: list[Step], produced: dict[str, str]) -> list[set[int]]:
    """For each step, the earlier steps whose answers hold an id it carries (it waits for them)."""
    consumes = set(produced.values())
    made: dict[tuple[str, str], int] = {}
    deps: list[set[int]] = []
    for i, s in enumerate(steps):
        used = {(k, str(x)) for k, v in s.args.items() if k in consumes for x in _values(v)}
        deps.append({made[u] for u in used if u in made})
        if s.outcome == OK:
            for leaf in _leaves(s.answer, produced, set()):
                made.setdefault(leaf, i)
    return deps


def _values(v: Any) -> Iterable[Any]:
    if isinstance(v, dict):
        for x in v.values():
            yield from _values(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _values(x)
    elif isinstance(v, (str, int)) and not isinstance(v, bool):
        yield v


def _learn(old: Any, new: Any, produced: dict[str, str], ids: dict[tuple[str, str], Any]) -> None:
    """Map each id the target chose in the found answer to the one it chose this time, under the
    argument that carries it back."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k, x in old.items():
            y = new.get(k)
            if k in produced and x is not None and y is not None and not isinstance(x, (dict, list)):
                ids.setdefault((produced[k], str(x)), y)  # the step that made it said it first (a publish)
            else:
                _learn(x, y, produced, ids)
    elif isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and len(old) == len(new):
        for x, y in zip(old, new):
            _learn(x, y, produced, ids)


def _renamed(args: dict[str, Any], fresh: tuple[str, ...], produced: dict[str, str],
             ids: dict[tuple[str, str], Any], tag: str) -> dict[str, Any] | None:
    """The step's arguments for this try: the harness's names suffixed with ``tag``, the target's ids mapped
    to this try's; None when an id it carries was not handed back this time."""
    consumes = set(produced.values())
    missing = False

    def one(k: str, v: Any) -> Any:
        nonlocal missing
        if isinstance(v, (list, tuple)):
            return type(v)(one(k, x) for x in v)
        if isinstance(v, str) and k in fresh:
            return f"{v}-{tag}"
        if k in consumes and v is not None:
            if (k, str(v)) not in ids:
                missing = True
            return ids.get((k, str(v)), v)
        return v

    out = {k: one(k, v) for k, v in args.items()}
    return None if missing else out


def estimate(rep: Replayer, w: Witness, tries: int = TRIES, deadline: float | None = None) -> Witness:
    """``w`` replayed ``tries`` times (fewer, at least one, when ``deadline`` comes first): how often it
    failed again, the answers of a replay that did, its curl lines."""
    got, last, curl = 0, None, []
    answered: list[Op] = []
    done = 0
    for i in range(tries):
        if i and deadline is not None and time.monotonic() > deadline:
            break
        done += 1
        t = rep.once(w.steps, w.sequential, record=w.sequential and not curl)
        answered += t.ops
        got += t.reproduced
        if t.reproduced:
            last = t
            curl = curl or t.curl
    steps = w.steps
    note = w.replay_note
    if not any(o.type == OK for o in answered):
        note = "the target answered no step of any try with success (refused, timed out or errored)"
    if last is not None:  # the table shows the answers of a replay that failed again
        steps = [replace(s, outcome=o.type, answer=o.value, took=round(o.complete_time - o.invoke_time, 6))
                 if o is not None and o.done else replace(s, outcome="not sent", answer=None, took=None)
                 for s, o in zip(w.steps, last.by_step)]
    return replace(w, steps=steps, tries=done, reproduced=got, curl=curl, replay_note=note,
                   last_violation=(last.result.first_violation or "") if last and last.result else "")


def hooks_for(case: "Case") -> CaseWitness | None:
    """The case's :class:`CaseWitness` (``<case package>.witness.WITNESS``), or None when it has none."""
    import importlib

    try:
        module = importlib.import_module(case.package + ".witness")
    except ModuleNotFoundError:
        return None
    return getattr(module, "WITNESS", None)


def _driver_factory(run: "Run") -> Callable[[History, Any], Any]:
    def make(history: History, transport: Any) -> Any:
        return run.build_driver(history=history, transport=transport)

    return make


__all__ = ["NEED", "Replayer", "TRIES", "Try", "estimate", "hooks_for", "steps_of"]
