"""Hypothesis state machines against a target that lives in real time: the verdict is the first
violating run's, whatever Hypothesis's replay of it does.

Hypothesis replays a failing example to report it. In virtual time the replay is the run
again; against a live server it is not: the target answers in its own time (an expiry job
has or has not run yet, a thread won a race), so the replay fails at another step, or not at
all, and Hypothesis raises ``FlakyFailure`` / ``FlakyStrategyDefinition`` instead of the
violation. :func:`run_machine` keeps the first violating run (the check's words, whole, and
every operation of that run's history) and reports *that* one:

* a violation was seen: FAIL with the kept violation, whatever the replay raised;
* a flaky replay with no violation seen: :class:`Undecided` (INCONCLUSIVE), saying so;
* anything else the harness raised is the harness's (INCONCLUSIVE, by the plugin), never FAIL.

:func:`failure_kind` reads what a property raised that way (the plugin's report hook uses it), and
:func:`extend_harness_timeout` keeps pytest-timeout from cutting a run shorter than it announced.

In process (virtual time) Hypothesis's own rules stand: shrinking and replay are exact there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from .checks import NotDecided


@dataclass
class Violation:
    """A promise a run broke: the check's message, whole, and every operation of that run."""

    message: str
    history: list[str] = field(default_factory=list)
    ops: list[Any] = field(default_factory=list, repr=False)  # the run's operations themselves: its witness's
    checks: tuple[str, ...] = ()  # the checks it broke, by name (none: the property's own assertion)
    replay: str = ""  # what Hypothesis's replay of it did, when it went otherwise

    def report(self, replay: str = "") -> str:
        lines = [self.message.rstrip(), "",
                 f"the violating run's history ({len(self.history)} operations, as recorded by the harness):"]
        lines += [f"  {line}" for line in self.history]
        if replay:
            lines += ["", replay]
        if self.history:  # a long history pushes the message out of a terminal's tail: say it once more
            lines += ["", "the broken promise, again: " + self.message.strip().splitlines()[0]]
        return "\n".join(lines)


class PropertyViolated(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """pytest's failure, carrying the violation's own words as the verdict's reason (never cut)."""

    def __init__(self, violation: Violation, replay: str = "", also: list[Violation] | None = None) -> None:
        text = violation.report(replay)
        for other in also or ():  # every other promise the property found broken, each judged on its own
            text += "\n\nand, judged on its own once the promise above was found broken:\n" + other.report()
        super().__init__(text, pytrace=False)
        self.reason = "; ".join(v.message.strip() for v in [violation, *(also or [])])
        self.violation, self.also = violation, list(also or [])


class Undecided(Exception):
    """The property could not decide (a flaky replay with no violation kept, the harness's own limit):
    the plugin makes the test's outcome INCONCLUSIVE with this reason."""


def history_of(machine: Any) -> list[str]:
    """The operations a machine's run recorded: ``machine.d.history`` (every case's machines), whole."""
    history = getattr(getattr(machine, "d", None), "history", None)
    ops = getattr(history, "ops", None) or []
    return [repr(op) for op in ops]


# rounds of a property over a URL at most: each finds one more broken check, or ends it
MAX_ROUNDS = 6


def run_machine(target: Any, machine: type, settings: Any = None) -> None:
    """Run ``machine`` as a test; over a URL, judged by its first violating run (see the module), and every
    promise on its own: once a run broke a check, that check is not judged again in this session (its first
    violation kept) and the machine runs again, so a second broken promise beside it is found too, until a
    round finds nothing new (at most :data:`MAX_ROUNDS`)."""
    if target.in_process:
        run_state_machine_as_test(machine, settings=settings)
        return
    from .checks import current_tally

    excused = current_tally().excused
    found: list[Violation] = []
    rounds = 1 if getattr(getattr(target, "spec", None), "stop_at_first", False) else MAX_ROUNDS
    try:
        for _ in range(rounds):
            try:
                _one_round(machine, settings)
                break
            except PropertyViolated as e:
                v = e.violation
                new = [c for c in v.checks if c not in excused]
                found.append(v)
                if not new:  # the property's own assertion, or nothing left to judge apart: the round's verdict
                    break
                for c in new:
                    excused[c] = (f"not judged again: {c} was found broken earlier in this run (its first violation "
                                  f"and witness kept); every other promise is judged on its own")
            except Undecided:
                if not found:
                    raise
                # a later round's replay went otherwise (a live target's timing) and found nothing new: the promises
                # already found broken stand. Raised on, it made a run that broke three promises INCONCLUSIVE,
                # "no run broke a promise", while their witnesses were replayed below it
                break
    finally:
        session = getattr(target, "session", None)
        if session is not None:  # replayed and shrunk once the session ends (its own time)
            session.kept.extend((target, v) for v in found)
    if found:
        raise PropertyViolated(found[0], found[0].replay, found[1:])


def _one_round(machine: type, settings: Any) -> None:
    kept: list[Violation] = []

    class FirstViolationKept(machine):  # type: ignore[misc,valid-type]
        def teardown(self) -> None:
            # Hypothesis calls teardown in a ``finally``: the error a step raised is still in flight
            raised = sys.exc_info()[1]
            try:
                super().teardown()
            except AssertionError as e:  # a check judged at the run's end
                raised = raised or e
                raise
            finally:
                if isinstance(raised, AssertionError) and not kept:
                    ops = list(getattr(getattr(getattr(self, "d", None), "history", None), "ops", None) or [])
                    kept.append(Violation(str(raised), history_of(self), ops, tuple(getattr(raised, "checks", ()))))

    FirstViolationKept.__name__ = FirstViolationKept.__qualname__ = machine.__name__
    _run_keeping(FirstViolationKept, settings, kept)


def _run_keeping(machine: type, settings: Any, kept: list[Violation]) -> None:
    try:
        run_state_machine_as_test(machine, settings=settings)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # pytest-timeout's failure is a BaseException too
        if kept:  # whatever the replay (or a limit of the harness) raised, the violation seen first stands
            kept[0].replay = _replay_went_otherwise(e)
            raise PropertyViolated(kept[0], kept[0].replay) from None
        if isinstance(e, Flaky):
            first = str(e).splitlines()[0] if str(e) else ""
            raise Undecided(f"Hypothesis's replay of a run against the live target went differently "
                            f"({type(e).__name__}: {first}) and no run broke a promise: nothing was decided. "
                            f"A target whose answers depend on time does this; run again") from None
        raise
    if kept:  # a violation Hypothesis did not report (a replay that passed and was not called flaky)
        kept[0].replay = "(Hypothesis reported no failure: its replay passed)"
        raise PropertyViolated(kept[0], kept[0].replay)


def _replay_went_otherwise(e: BaseException) -> str:
    if isinstance(e, AssertionError):
        return ""
    return (f"(this is the first run that broke the promise; Hypothesis's replay of it against the live "
            f"target went differently, {type(e).__name__}: a target answers in its own time, so the run "
            f"seen is the evidence)")


TIMEOUT_PREFIX = "Timeout (>"  # pytest-timeout's failure message


def failure_kind(error: BaseException) -> tuple[str, str]:
    """("violation" | "undecided" | "harness", the reason in full) for what a property raised.

    A broken promise is an AssertionError or pytest's failure (``pytest.fail``); the harness's
    own time limit (pytest-timeout), a flaky replay with no violation (:class:`~peakproof.realtime.
    Undecided`) and any other exception are not the target's: they are never FAIL."""
    chain = list(_chain(error))
    for e in chain:
        text = str(getattr(e, "msg", "") or e)
        if isinstance(e, pytest.fail.Exception) and text.startswith(TIMEOUT_PREFIX):
            return "undecided", (f"stopped by the harness's own limit, not the target: {text.strip()} (pytest's "
                                 f"--timeout / the timeout ini); raise it above the duration the run announced, "
                                 f"or state the target's shorter windows (--help)")
    if isinstance(error, PropertyViolated):
        return "violation", error.reason
    if isinstance(error, (Undecided, NotDecided)):
        return "undecided", str(error)
    if isinstance(error, (AssertionError, pytest.fail.Exception)):
        return "violation", str(getattr(error, "msg", "") or error).strip()
    return "harness", (f"the harness raised {type(error).__name__}: {error} (a bug in peakproof or its "
                       f"options, not the target's failure; its traceback is printed under \"peakproof: the "
                       f"harness's own error\")")


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]  # type: ignore[list-item]


def extend_harness_timeout(item: pytest.Item, seconds: float) -> float | None:
    """Re-arm pytest-timeout (when it is on) so that it fires no sooner than ``seconds`` from now: a
    run that announced how long it takes is never cut short by a shorter limit of the harness.
    Returns the new limit, or None when no limit was on or it was long enough."""
    hook = item.config.pluginmanager.hook
    if not hasattr(hook, "pytest_timeout_set_timer") or not hasattr(item, "cancel_timeout"):
        return None
    marker = item.get_closest_marker("timeout")
    current = (marker.args[0] if marker and marker.args else None) or item.config.getoption("timeout", None) \
        or item.config.getini("timeout")
    try:
        current = float(current or 0)
    except (TypeError, ValueError):
        return None
    if current <= 0 or current >= seconds:
        return None
    from pytest_timeout import Settings  # the plugin's own record of a timer's settings

    method = item.config.getoption("timeout_method", None) or item.config.getini("timeout_method") or "signal"
    hook.pytest_timeout_cancel_timer(item=item)
    hook.pytest_timeout_set_timer(item=item, settings=Settings(seconds, method, False, False))
    return seconds
