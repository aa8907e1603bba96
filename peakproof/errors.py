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


class DriverSpecError(UsageError):
    pass
