"""Shrink a witness while it still reproduces, and :func:`reproduce`: a witness for every violated check.

The shrink (delta debugging, Zeller) keeps a candidate only while it fails the check again at
the stated rate (``peakproof.replay.NEED``: 2 of 4 tries): first its gaps compressed (all at once,
then a tenth, a half, as found: the first that still fails again), then in rounds until one changes
nothing: the setup made smaller (a quota of one unit), every step of one kind dropped, the steps
cut to the last few before the violation, chunks dropped (ddmin), setup steps dropped, the actors
merged; then the concurrency turned sequential where it survives. It stops at its time bound and
says what it reached. :func:`reproduce` finds each violated check's witness in a stage's history
(the case's :class:`~peakproof.witness.CaseWitness`), shrinks it against the target and writes it
beside the report.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .checks import CheckResult
from .history import Op
from .replay import NEED, TRIES, OutOfTime, Replayer, estimate, hooks_for, steps_of
from .witness import Step, Witness, write_files

if TYPE_CHECKING:
    from .run import Run

STOP_GRACE = 5.0  # s past its bound a try may still send (it is judged on what it sent)
SEQUENTIAL_FIRST = (50, 5.0)  # steps and s of span up to which a witness is first tried one step at a time
UNKEYED = 200  # operations a witness keeps of a run whose violation names no key (the last before it ended)


def reproduce(run: "Run", history: Sequence[Op], results: list[CheckResult], *,
              seconds: float, directory: str, stem: str, log: Callable[[str], None] = lambda s: None) -> list[Witness]:
    """A witness for each violated check of ``results``, replayed and shrunk against ``run``'s target within
    ``seconds`` in all (0: found, not replayed); each written next to the report. The stage's history is
    not touched: a replay records in its own."""
    spec = run.spec
    hooks = hooks_for(run.case)
    failed = [r for r in results if r.valid is False]
    if not failed or hooks is None:
        return []
    out: list[Witness] = []
    deadline = time.monotonic() + seconds
    for r in failed:
        try:
            found = hooks.find(history, r)
        except Exception:  # noqa: BLE001 - a history the finder did not expect: cut by no key instead
            found = None
        if found is None:  # the check names nothing a witness can be cut by: the run's last operations
            tail = [op for op in history if op.process != "harness"][-UNKEYED:]
            found = (f"the run's last {len(tail):,} operations (the violation names no key to cut them by)", tail)
        key, ops, *context = found
        steps, size = steps_of(ops, hooks.setup)
        try:
            state = hooks.state(spec, list(ops)) if seconds else {}
        except Exception as e:  # noqa: BLE001 - the side records could not be read: nothing rebuilt, said so
            state = {"note": f"what the run recorded beside it could not be read ({type(e).__name__}: {e})"[:300]}
        w = Witness(spec.case, r.name, r.first_violation or "", key, steps, size,
                    target={"url": spec.target_url, "spec": _portable(spec)}, context=list(context[0]) if context else [], state=state)
        left = deadline - time.monotonic()
        if left <= 1:
            w = replace(w, replay_note="no time left for it (--replay-seconds)" if seconds else "--replay-seconds 0")
        else:
            log(f"peakproof: replaying the witness of {r.name} ({w.size} operations, up to {left:.0f} s)")
            rep = Replayer(hooks, run, r.name, state)
            try:
                w = shrink(rep, w, left / max(1, len(failed) - len(out)) if len(failed) > 1 else left)
            except Exception as e:  # noqa: BLE001 - a replay that raised: the witness as found, and why
                w = replace(w, replay_note=f"its replay raised {type(e).__name__}: {e}"[:300])
        w.target["files"] = [str(p) for p in _write(w, directory, f"{stem}-{r.name}")]
        out.append(w)
    return out


def property_witness(run: "Run", violation: Any, stem: str, why: str = "") -> Witness:
    """A property's violation that no check of its history states (an answer the property judged on the
    spot): its whole run as the witness, not replayed (a replay has no check to judge it by)."""
    spec = run.spec
    hooks = hooks_for(run.case)
    steps, size = steps_of(violation.ops, hooks.setup if hooks else ())
    w = Witness(spec.case, "property", violation.message.strip().splitlines()[0] if violation.message else "",
                "the property's run", steps, size, replay_note=why or "the property judged it, not a check of the "
                                                                     "history: a replay has nothing to judge it by",
                target={"url": spec.target_url, "spec": _portable(spec)})
    w.target["files"] = [str(p) for p in _write(w, spec.report_dir, f"{stem}-property")]
    return w


def _write(w: Witness, directory: str, stem: str) -> tuple[Any, Any]:
    return write_files(w, directory, stem)


def _portable(spec: Any) -> dict[str, Any]:
    """The spec, its driver's file made absolute (the script runs from any folder)."""
    doc = spec.to_json()
    driver = doc.get("driver")
    if driver and ":" in driver:
        path, cls = driver.rsplit(":", 1)
        if path.endswith(".py") and os.path.exists(path):
            doc["driver"] = f"{os.path.abspath(path)}:{cls}"
    for k in ("result", "html", "junit"):
        doc[k] = None
    return doc


# -- the shrink ---------------------------------------------------------------------------------------------


def shrink(rep: Replayer, w: Witness, seconds: float, tries: int = TRIES) -> Witness:
    """``w`` replayed and shrunk within ``seconds``: the smallest witness that still reproduced at
    :data:`NEED`, with its rate over ``tries`` tries and, when sequential, its curl lines."""
    started = time.monotonic()
    deadline = started + seconds * 0.7  # the rest for the final estimate
    rep.stop_at = started + seconds + STOP_GRACE  # a try under way when the bound comes sends no more
    steps = list(w.steps)
    rep.sequential = False
    reached: list[str] = []
    try:
        span = max((s.at for s in steps), default=0.0)
        # one after the other, in the order found (deterministic from here on): tried first on a short witness only;
        # a long one is tried so once it has shrunk
        if len(steps) <= SEQUENTIAL_FIRST[0] and span <= SEQUENTIAL_FIRST[1] and rep.holds(steps, True, deadline):
            rep.sequential = True
            steps = _pass_gaps(rep, steps, deadline, found_holds=True) or steps
        else:
            held = _pass_gaps(rep, steps, deadline)
            if held is None:
                reached.append(f"not shrunk: neither the witness as found nor with its gaps compressed failed again "
                               f"in {NEED[0]} of {NEED[1]} tries")
                raise _Stop
            steps = held
        while True:  # rounds of every pass, until one changes nothing (or the time is up)
            before = steps
            for one_pass in (_pass_drop_kinds, _pass_setup_smaller, _pass_suffix, _pass_ddmin, _pass_drop_setup,
                             _pass_merge_actors):
                steps = one_pass(rep, steps, deadline)
            if steps == before:
                break
        if not rep.sequential and rep.holds(steps, True, deadline):
            rep.sequential = True
        reached.append(f"shrunk from {w.size} to {len(steps)} in {rep.tries} tries" if len(steps) < w.size else
                       f"no step could be dropped ({rep.tries} tries)")
    except OutOfTime:
        reached.append(f"stopped at its time bound ({seconds:.0f} s) after {rep.tries} tries, at {len(steps)} operations")
    except _Stop:
        pass
    out = replace(w, steps=steps, sequential=rep.sequential, shrink="; ".join(reached))
    return estimate(rep, out, tries, started + seconds)


class _Stop(Exception):
    pass


def _pass_gaps(rep: Replayer, steps: list[Step], deadline: float, found_holds: bool = False) -> list[Step] | None:
    """The steps with their gaps compressed as far as they still fail again (all at once first, then a tenth,
    a half, then as found unless ``found_holds`` says it does); None when none does."""
    for factor in (0.0, 0.1, 0.5) + (() if found_holds else (1.0,)):
        cand = [s if s.setup else replace(s, at=round(s.at * factor, 6)) for s in steps]
        if rep.holds(cand, rep.sequential, deadline):
            return cand
    return None


def _pass_setup_smaller(rep: Replayer, steps: list[Step], deadline: float) -> list[Step]:
    for i, s in enumerate(steps):
        if not s.setup:
            continue
        for args in rep.hooks.smaller(s):
            cand = steps[:i] + [replace(s, args=args)] + steps[i + 1:]
            if rep.holds(cand, rep.sequential, deadline):
                steps = cand
                break
    return steps


def _pass_drop_kinds(rep: Replayer, steps: list[Step], deadline: float) -> list[Step]:
    """Every step of one operation (all the confirms, all the reads) dropped at once."""
    for f in dict.fromkeys(s.f for s in steps if not s.setup):
        cand = [s for s in steps if s.setup or s.f != f]
        if any(not s.setup for s in cand) and rep.holds(cand, rep.sequential, deadline):
            steps = cand
    return steps


def _pass_suffix(rep: Replayer, steps: list[Step], deadline: float) -> list[Step]:
    setup = [s for s in steps if s.setup]
    rest = [s for s in steps if not s.setup]
    for m in itertools.takewhile(lambda m: m < len(rest), (2 ** k for k in range(1, 12))):
        cand = setup + _retimed(rest[-m:])
        if rep.holds(cand, rep.sequential, deadline):
            return cand
    return steps


def _retimed(rest: list[Step]) -> list[Step]:
    t0 = min((s.at for s in rest), default=0.0)
    return [replace(s, at=round(s.at - t0, 6)) for s in rest]


def _pass_ddmin(rep: Replayer, steps: list[Step], deadline: float) -> list[Step]:
    """Zeller's ddmin over the non-setup steps: drop a chunk while the rest still reproduces."""
    setup = [s for s in steps if s.setup]
    rest = [s for s in steps if not s.setup]
    n = 2
    while len(rest) >= 2:
        size = max(1, len(rest) // n)
        chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
        for i in range(len(chunks)):
            cand = [s for j, c in enumerate(chunks) if j != i for s in c]
            if cand and rep.holds(setup + cand, rep.sequential, deadline):
                rest, n = cand, max(n - 1, 2)
                break
        else:
            if n >= len(rest):
                break
            n = min(len(rest), n * 2)
    return setup + rest


def _pass_drop_setup(rep: Replayer, steps: list[Step], deadline: float) -> list[Step]:
    i = 0
    while i < len(steps):
        if steps[i].setup and sum(s.setup for s in steps) > 1:
            cand = steps[:i] + steps[i + 1:]
            if rep.holds(cand, rep.sequential, deadline):
                steps = cand
                continue
        i += 1
    return steps


def _pass_merge_actors(rep: Replayer, steps: list[Step], deadline: float) -> list[Step]:
    for name in rep.hooks.actors:
        first = next((s.args[name] for s in steps if name in s.args), None)
        if first is None:
            continue
        cand = [replace(s, args={**s.args, name: first}) if name in s.args else s for s in steps]
        if cand != steps and rep.holds(cand, rep.sequential, deadline):
            steps = cand
    return steps


__all__ = ["property_witness", "reproduce", "shrink"]
