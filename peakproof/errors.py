"""One error hierarchy for the harness. Messages say what was expected, what came, and how to fix it."""

from __future__ import annotations


class PeakproofError(Exception):
    """Base of every error the harness raises on purpose."""


class UsageError(PeakproofError):
    """Bad options or parameters from the user."""

    def __init__(self, what: str, expected: str, actual: object, fix: str = "") -> None:
        text = f"{what}: expected {expected}; got {actual!r}."
        if fix:
            text += f" {fix}"
        super().__init__(text)


class TargetError(PeakproofError):
    """The target misbehaved in a way the harness cannot turn into a finding."""


class SetupFailed(TargetError):
    """A scenario could not prepare the target (it refused, answered 5xx or off-contract): a finding."""


class SetupUnanswered(PeakproofError):
    """The target did not answer a scenario's set-up (timeouts, resets), even when asked again: nothing
    was decided. Not a finding: a target still working off an earlier stage's backlog does this."""


class DriverSpecError(UsageError):
    pass


class OffContract(TargetError):
    """The target answered a call of the case's contract with 404 / 405 / 501: it speaks another API
    (or lacks the route). Not a broken promise: INCONCLUSIVE, with the way out (a driver)."""

    def __init__(self, case: str, what: str, answer: object, driver: str | None = None) -> None:
        if driver:
            text = (f"the target answered {answer} to {what} through your driver {driver}: it has no such route. "
                    f"Check the driver's method against the service (peakproof driver check {case} --driver "
                    f"{driver} --target-url URL)")
        else:
            text = (f"this target does not speak the {case} contract: it answered {answer} to {what}. Write a "
                    f"driver for its API (peakproof driver new {case}) and pass it with --driver")
        super().__init__(text)
