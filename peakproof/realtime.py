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

In process (virtual time) Hypothesis's own rules stand: shrinking and replay are exact there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test


@dataclass
class Violation:
    """A promise a run broke: the check's message, whole, and every operation of that run."""

    message: str
    history: list[str] = field(default_factory=list)

    def report(self, replay: str = "") -> str:
        lines = [self.message.rstrip(), "",
                 f"the violating run's history ({len(self.history)} operations, as recorded by the harness):"]
        lines += [f"  {line}" for line in self.history]
        if replay:
            lines += ["", replay]
        return "\n".join(lines)


class PropertyViolated(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """pytest's failure, carrying the violation's own words as the verdict's reason (never cut)."""

    def __init__(self, violation: Violation, replay: str = "") -> None:
        super().__init__(violation.report(replay), pytrace=False)
        self.reason = violation.message.strip()


class Undecided(Exception):
    """The property could not decide (a flaky replay with no violation kept, the harness's own limit):
    the plugin makes the test's outcome INCONCLUSIVE with this reason."""


def history_of(machine: Any) -> list[str]:
    """The operations a machine's run recorded: ``machine.d.history`` (every case's machines), whole."""
    history = getattr(getattr(machine, "d", None), "history", None)
    ops = getattr(history, "ops", None) or []
    return [repr(op) for op in ops]


def run_machine(target: Any, machine: type, settings: Any = None) -> None:
    """Run ``machine`` as a test; over a URL, judged by its first violating run (see the module)."""
    if target.in_process:
        run_state_machine_as_test(machine, settings=settings)
        return
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
                    kept.append(Violation(str(raised), history_of(self)))

    FirstViolationKept.__name__ = FirstViolationKept.__qualname__ = machine.__name__
    try:
        run_state_machine_as_test(FirstViolationKept, settings=settings)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # pytest-timeout's failure is a BaseException too
        if kept:  # whatever the replay (or a limit of the harness) raised, the violation seen first stands
            raise PropertyViolated(kept[0], _replay_went_otherwise(e)) from None
        if isinstance(e, Flaky):
            first = str(e).splitlines()[0] if str(e) else ""
            raise Undecided(f"Hypothesis's replay of a run against the live target went differently "
                            f"({type(e).__name__}: {first}) and no run broke a promise: nothing was decided. "
                            f"A target whose answers depend on time does this; run again") from None
        raise
    if kept:  # a violation Hypothesis did not report (a replay that passed and was not called flaky)
        raise PropertyViolated(kept[0], "(Hypothesis reported no failure: its replay passed)")


def _replay_went_otherwise(e: BaseException) -> str:
    if isinstance(e, AssertionError):
        return ""
    return (f"(this is the first run that broke the promise; Hypothesis's replay of it against the live "
            f"target went differently, {type(e).__name__}: a target answers in its own time, so the run "
            f"seen is the evidence)")
