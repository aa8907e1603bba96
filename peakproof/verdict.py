"""Verdicts: PASS / FAIL / INCONCLUSIVE, merged the way Jepsen merges validity.

One rule for every entry point (``peakproof run``, ``locust -f loadtests/``, the
properties' summary, the report, ``index.html``, the JSON sidecar):

* **FAIL** (exit 1): the target broke a promise: some result is ``False``.
* **INCONCLUSIVE** (exit 2): nothing failed, but something was not decided: a check came
  out ``unknown`` (its operations' outcomes could explain either answer, or nothing could
  have violated it), the generator could not offer the curve, a scenario raised, setup
  failed for a reason that is not the target's. ``unknown`` ranks above ``true``.
* **PASS** (exit 0): every check and service level was decided and held.

Pure: no I/O, no Locust, so every path is unit-tested.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable

from .checks import CheckResult


class Outcome(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]

    def __str__(self) -> str:
        return self.value


EXIT_CODES = {Outcome.PASS: 0, Outcome.FAIL: 1, Outcome.INCONCLUSIVE: 2}


@dataclass
class Verdict:
    """An outcome and the sentences that explain it (leading with the cause and the fix)."""

    outcome: Outcome
    reasons: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "reasons": self.reasons}


def merge_outcomes(outcomes: Iterable[Outcome]) -> Outcome:
    """FAIL beats INCONCLUSIVE beats PASS; no parts at all is INCONCLUSIVE (nothing was tested)."""
    seen = list(outcomes)
    if not seen:
        return Outcome.INCONCLUSIVE
    if Outcome.FAIL in seen:
        return Outcome.FAIL
    if Outcome.INCONCLUSIVE in seen:
        return Outcome.INCONCLUSIVE
    return Outcome.PASS


def judge_results(results: Iterable[CheckResult], harness_errors: Iterable[str] = ()) -> Verdict:
    """The verdict of a set of results: violated -> FAIL; undecided or a harness error -> INCONCLUSIVE."""
    results = list(results)
    errors = list(harness_errors)
    failed = [r for r in results if r.valid is False]
    if failed:
        return Verdict(Outcome.FAIL, [f"{r.name}: {r.first_violation or r.note or 'violated'}" for r in failed])
    undecided = [r for r in results if not r.decided and r.valid != "waived"]
    reasons = [f"harness error: {e}" for e in errors]
    reasons += [f"{r.name} undecided: {r.note or 'outcome unknown'}" for r in undecided]
    if reasons:
        return Verdict(Outcome.INCONCLUSIVE, reasons)
    if not [r for r in results if r.decided]:
        return Verdict(Outcome.INCONCLUSIVE, ["no check ran" if not results else "every check was waived"])
    # a PASS lists what the user waived (--without): the promises it did not check
    return Verdict(Outcome.PASS, [f"{r.name} {r.note}" for r in results if r.valid == "waived"])


def outcome_of(valid: Any) -> Outcome:
    """A single result's validity as an outcome."""
    return Outcome.PASS if valid is True else Outcome.FAIL if valid is False else Outcome.INCONCLUSIVE


MARKS = {True: "ok", False: "FAIL", "unknown": "??", "waived": "waived"}


def mark(valid: Any) -> str:
    return MARKS.get(valid, "??")
