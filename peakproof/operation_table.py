"""One table per case of the operations a driver offers: the single source of what the docs'
tables (``peakproof driver docs``), the skeleton (``peakproof driver new``) and ``driver check``
say about each operation, so they cannot disagree.

A case's ``checkup`` module holds its ``OPERATIONS``; the signatures come from the case's
protocol (and, for a capability, from the HTTP driver that offers it), never from here, and
``tests/unit`` holds the table to the protocol: the same operations, the same number of
arguments, and every capability's methods listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .history import OK, Op


@dataclass(frozen=True)
class OperationSpec:
    """One operation of a case's driver, as the checks read it."""

    name: str  # the driver's method
    args: tuple[str, ...]  # the names its arguments are recorded under in the history (the checks read them)
    does: str  # what the method must do, its refusals and their codes (markdown: `code`)
    returns: str = "anything"  # the op's value when ok (markdown)
    fields: tuple[str, ...] = ()  # the value's fields the checks read: the skeleton's parser lists them
    parser: str | None = None  # the skeleton's parser for the value
    capability: str | None = None  # the optional capability it belongs to; None: the protocol requires it
    recorded_as: str | None = None  # the op's name in the history when it is not the method's


def tables(ops: Iterable[OperationSpec]) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]],
                                                  dict[str, str], dict[str, str]]:
    """``(ARGS, VALUES, PARSERS, DOCS)`` by operation name, as ``driver check`` and the skeleton
    read them (``ARGS`` is keyed by the recorded name too, where it differs)."""
    ops = list(ops)
    args = {o.recorded_as or o.name: o.args for o in ops}
    values = {o.name: o.fields for o in ops if o.fields}
    parsers = {o.name: o.parser for o in ops if o.parser}
    docs = {o.name: _plain(o.does + ("" if o.returns == "anything" else f" Value: {o.returns}")) for o in ops}
    return args, values, parsers, docs


def _plain(text: str) -> str:
    """Markdown to a docstring's words: backticks off."""
    return text.replace("`", "")


def brief(value: Any, limit: int = 400) -> str:
    """A value as ``driver check`` shows it: its repr, cut at ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Step:
    """One call of the check: what was asked, what came, and whether the harness read it as it should."""

    label: str
    op: Op | None = None
    expect: str = ""  # what the harness needs to see, in words
    holds: bool = True
    detail: str = ""
    problems: list[str] = field(default_factory=list)
    # the check this step's expectation is a promise of (a read after an unfollow: unfollowed_authors_never_shown):
    # a product that does not keep it by design states it (peakproof.design), or what it showed is a finding
    promise: str = ""

    def lines(self) -> list[str]:
        mark = "ok " if self.holds and not self.problems else "NO "
        got = ""
        if self.op is not None:
            got = (f"ok, value {brief(self.op.value)}" if self.op.type == OK
                   else f"{self.op.type} {self.op.value!r}" + (f" ({self.op.error[:120]})" if self.op.error else ""))
        out = [f"  [{mark}] {self.label}" + (f" -> {got}" if got else "")]
        if self.expect:
            out.append(f"         expected: {self.expect}")
        if self.detail:
            out.append(f"         {self.detail}")
        out += [f"         problem: {p}" for p in self.problems]
        return out


__all__ = ["OperationSpec", "Step", "brief", "tables"]
