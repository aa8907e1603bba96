"""Check results: what a checker (a pure function of a history) returns.

``valid`` is True, False, or "unknown" (the history cannot decide, e.g. because operations
whose outcome is unknown could explain it either way). A result carries counts, the first
violation as a readable sentence plus its operations, and a few examples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

Validity = bool | Literal["unknown"]


@dataclass
class CheckResult:
    name: str
    valid: Validity
    counts: dict[str, Any] = field(default_factory=dict)
    first_violation: str | None = None
    examples: list[Any] = field(default_factory=list)
    note: str | None = None

    @property
    def failed(self) -> bool:
        return self.valid is False

    def summary(self) -> str:
        mark = {True: "ok", False: "FAIL", "unknown": "unknown"}[self.valid]
        counts = ", ".join(f"{k} {_fmt(v)}" for k, v in self.counts.items())
        text = f"{self.name}: {mark}" + (f" ({counts})" if counts else "")
        if self.first_violation:
            text += f"\n  first violation: {self.first_violation}"
            for ex in self.examples[:3]:
                text += f"\n    {ex!r}"
        if self.note:
            text += f"\n  note: {self.note}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "valid": self.valid, "counts": self.counts,
                "first_violation": self.first_violation,
                "examples": [repr(e) for e in self.examples[:5]], "note": self.note}


class Violations:
    """Collects violations while a checker walks a history; keeps the first few in full."""

    def __init__(self, keep: int = 5) -> None:
        self.count = 0
        self.first: str | None = None
        self.examples: list[Any] = []
        self._keep = keep

    def add(self, sentence: str, *evidence: Any) -> None:
        self.count += 1
        if self.first is None:
            self.first = sentence
        if len(self.examples) < self._keep:
            self.examples.append(evidence[0] if len(evidence) == 1 else evidence)

    def result(self, name: str, counts: dict[str, Any], unknown: bool = False, note: str | None = None) -> CheckResult:
        valid: Validity = False if self.count else ("unknown" if unknown else True)
        return CheckResult(name, valid, {**counts, "violations": self.count}, self.first, self.examples, note)


def assert_checks(results: Iterable[CheckResult]) -> None:
    """Raise AssertionError naming every failed check (for tests and properties)."""
    failed = [r for r in results if r.failed]
    if failed:
        raise AssertionError("\n".join(r.summary() for r in failed))


def run_checks(checks: Iterable[Callable[..., CheckResult]], *args: Any, **kwargs: Any) -> list[CheckResult]:
    return [check(*args, **kwargs) for check in checks]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
