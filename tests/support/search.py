"""A property's search made repeatable (:func:`fixed_budget`) and its failure read whole
(:func:`failure_text`): for the tests that ask whether a property catches a bug."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings


def fixed_budget(max_examples: int, stateful_step_count: int = 30, *, shrink: bool = True) -> settings:
    """A search that finds the same bugs in every ``HYPOTHESIS_PROFILE``, every time.

    Derandomized, no example database, a fixed number of examples and steps: whether a
    broken target is caught must not depend on the profile, the machine or luck.
    ``shrink=False`` stops at the first failing example (the question is *whether* the
    property catches the bug; the shrunk counterexample is other tests' business).
    """
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=max_examples, stateful_step_count=stateful_step_count, derandomize=True,
                    database=None, deadline=None, print_blob=False, suppress_health_check=list(HealthCheck),
                    phases=phases)


def failure_text(exc: BaseException) -> str:
    """All messages of a failure, including every distinct bug Hypothesis reports in a group."""
    if isinstance(exc, BaseExceptionGroup):
        return "\n".join(failure_text(e) for e in exc.exceptions)
    return str(exc)
