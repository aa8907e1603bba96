"""A product's own design, stated: where it differs from the seed's design by choice, not by a bug.

A product a team already runs was not built from the seed: it keeps some of the seed's promises, makes others
its own way, and lacks a few (one channel per notification, no breaker, holds that never lapse). Judged
against the seed's one design it FAILs for those choices, and no run of it can ever PASS. A
:class:`Statement` names one such choice: the user states it (an option, ``--no-breaker``; or the driver's
``design`` attribute, a mapping of statement names to values, for a driver that knows its service), and

* the checks it makes meaningless are **left out by name**, whatever they found ("not checked:
  breaker_opens_when_due, because you stated --no-breaker: your service has no circuit breaker");
* every other check is judged as before, and a check still judged that FAILs where an unstated statement
  would explain it says which ("if your service has no circuit breaker, state --no-breaker: this check is
  then not judged; otherwise this is a finding");
* the verdict lists what was stated and what it left out.

Pure: no I/O. The load's judge and the properties' session (through the chance tally, so a property's
``assert_checks`` leaves the same checks out) call :meth:`StatedDesign.apply`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from .checks import CheckResult
from .errors import UsageError


@dataclass(frozen=True)
class Statement:
    """One way a product may differ from the seed's design, as its owner states it.

    ``name``: the option's name (``--no-breaker`` for ``no_breaker``) and the key of a driver's ``design``.
    ``says``: what the product then does, completing "your service ...".
    ``leaves_out``: the checks it makes meaningless (left out whatever they found), when ``leaves_out_when``
    holds of the stated value (a cascade of "none" leaves out what a cascade of "after-any" does not).
    ``why``: why those checks say nothing of such a product.
    ``explains``: checks still judged whose FAIL the statement, unstated, would explain (a hint on the FAIL);
    the checks it leaves out are explained by it too.
    ``kind``: parses a stated value (None: a switch, stated or not); ``choices``: the values it takes.
    """

    name: str
    says: str
    leaves_out: tuple[str, ...] = ()
    why: str = ""
    explains: tuple[str, ...] = ()
    kind: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    leaves_out_when: Callable[[Any], bool] = bool
    metavar: str | None = None
    example: Any = None  # the value a hint suggests (a choice other than the seed's: --cascade none)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def stating(self, value: Any = True) -> str:
        """The option that states it with ``value``: ``--no-breaker``, ``--cascade none``."""
        if self.kind is None and self.choices is None:
            return self.flag
        shown = ",".join(map(str, value)) if isinstance(value, (tuple, list, frozenset, set)) else value
        return f"{self.flag} {shown}"

    def says_with(self, value: Any = True) -> str:
        return self.says.format(value=value if not isinstance(value, (tuple, list, set, frozenset))
                                else ", ".join(map(str, value)))

    def left_out(self, value: Any) -> tuple[str, ...]:
        return self.leaves_out if self.leaves_out_when(value) else ()

    def parse(self, value: Any) -> Any:
        """A stated value, as given on the command line or in a driver's ``design`` (text or typed)."""
        if self.kind is None and self.choices is None:
            if isinstance(value, bool):
                return value
            raise UsageError(self.flag, "true or false (a statement that holds or not)", value,
                             f"Set design = {{{self.name!r}: True}} in the driver, or pass {self.flag}.")
        if self.choices is not None and not isinstance(value, str):
            raise UsageError(self.flag, f"one of {', '.join(self.choices)}", value,
                             f"State it as {self.flag} {self.choices[0]}.")
        try:
            # text from the command line; a list from a driver's design (channels) is parsed the same way
            parsed = self.kind(value) if self.kind is not None and isinstance(value, (str, list, tuple)) else value
        except (ValueError, TypeError) as e:
            raise UsageError(self.flag, self.metavar or "a value it takes", value, str(e)) from None
        if self.choices is not None and parsed not in self.choices:
            raise UsageError(self.flag, f"one of {', '.join(self.choices)}", value,
                             f"State it as {self.flag} {self.choices[0]}.")
        return parsed


@dataclass(frozen=True)
class StatedDesign:
    """What the user stated of a case's :class:`Statement` s (name -> value), and what follows from it."""

    statements: tuple[Statement, ...]
    stated: Mapping[str, Any] = field(default_factory=dict)

    def of(self, name: str) -> Statement:
        return next(s for s in self.statements if s.name == name)

    def value(self, name: str, default: Any = None) -> Any:
        return self.stated.get(name, default)

    def holds(self, name: str) -> bool:
        """Is ``name`` stated (with a value that is not nothing)?"""
        return bool(self.stated.get(name))

    def left_out(self) -> dict[str, Statement]:
        """Each check left out, to the statement that leaves it out (the first stated one)."""
        out: dict[str, Statement] = {}
        for s in self.statements:
            if s.name in self.stated:
                for check in s.left_out(self.stated[s.name]):
                    out.setdefault(check, s)
        return out

    def reason(self, check: str) -> str | None:
        """Why ``check`` is not checked, or None when it is judged."""
        s = self.left_out().get(check)
        if s is None:
            return None
        value = self.stated[s.name]
        return (f"not checked: {check}, because you stated {s.stating(value)} (your service {s.says_with(value)})"
                + (f": {s.why}" if s.why else ""))

    def hint(self, check: str) -> str | None:
        """For a check that FAILed: the unstated statements that would explain it, as what to state."""
        unstated = [s for s in self.statements if s.name not in self.stated
                    and (check in s.leaves_out or check in s.explains)]
        if not unstated:
            return None
        ways = "; or ".join(f"if your service {s.says_with(_example(s))}, state {s.stating(_example(s))}"
                            for s in unstated)
        return f"{ways}: the design then explains this check's outcome; otherwise this is a finding"

    def undecided_hint(self, check: str) -> str | None:
        """For a check left undecided (no chance to fail): the unstated statements that would explain it, as what
        to state. One that leaves it out makes it meaningless (a product whose holds never lapse gives a late
        payment no lapse to come after); one that changes what it judges gives it the chance the seed's design
        could not (a dead address cannot meet three channels in a service with one a notification)."""
        unstated = [s for s in self.statements if s.name not in self.stated and (check in s.leaves_out
                                                                                 or check in s.explains)]
        if not unstated:
            return None
        return "; or ".join(f"if your service {s.says_with(_example(s))}, state {s.stating(_example(s))}: this "
                            + ("check is then not judged" if check in s.leaves_out else
                               "check then judges by that design") for s in unstated)

    def apply(self, results: Iterable[CheckResult]) -> list[CheckResult]:
        """The results, those the stated design leaves out marked so (``waived``, saying which statement),
        and each FAIL an unstated statement would explain, or undecided one it would leave out, saying which."""
        out = []
        for r in results:
            why = self.reason(r.name)
            if why is not None:
                out.append(replace(r, valid="waived", note=why + (f" (it found: {r.why()})" if r.why() else "")))
                continue
            hint = self.hint(r.name) if r.failed else self.undecided_hint(r.name) if r.valid == "unknown" else None
            out.append(replace(r, note=f"{r.note}; {hint}" if r.note else hint) if hint else r)
        return out

    def lines(self) -> list[str]:
        """What the verdict lists: each statement made and the checks it left out."""
        lines = []
        for s in self.statements:
            if s.name in self.stated:
                value = self.stated[s.name]
                gone = s.left_out(value)
                lines.append(f"stated: {s.stating(value)} (your service {s.says_with(value)})"
                             + (f"; not checked: {', '.join(gone)}" if gone else "; every check still judged"))
        return lines

    def to_json(self) -> dict[str, Any]:
        return {name: (list(v) if isinstance(v, (tuple, frozenset, set)) else v) for name, v in self.stated.items()}


def _example(s: Statement) -> Any:
    if s.example is not None:
        return s.example
    if s.kind is None and s.choices is None:
        return True
    if s.choices:
        return s.choices[0]
    return s.metavar or "VALUE"


def design_options(statements: Iterable[Statement], surfaces: frozenset[str]) -> tuple[Any, ...]:
    """Each statement as an option of ``surfaces`` (``peakproof run --help`` lists them with what they
    leave out)."""
    from .options import Option

    out = []
    for s in statements:
        gone = f"; not checked then: {', '.join(s.leaves_out)}" if s.leaves_out else ""
        text = f"design: your service {s.says_with(s.metavar or 'VALUE')}{gone}"
        if s.kind is None and s.choices is None:
            out.append(Option(s.name, text, surfaces, action="store_true"))
        else:
            out.append(Option(s.name, text, surfaces, kind=s.kind, choices=s.choices))
    return tuple(out)


def stated_design(statements: Iterable[Statement], given: Mapping[str, Any] | None = None,
                  driver: Any = None) -> StatedDesign:
    """What is stated: the driver's ``design`` (a mapping of statement names to values), under what the
    options gave (``given``: name -> value; None or False is not given). A name no statement has is a
    usage error naming the ones there are."""
    statements = tuple(statements)
    known = {s.name: s for s in statements}
    stated: dict[str, Any] = {}
    carried = getattr(driver, "design", None) if driver is not None else None
    if carried is not None and not isinstance(carried, Mapping):
        raise UsageError("the driver's design", "a mapping of statement names to values, e.g. "
                         "{'no_breaker': True}", carried, "Give the driver class a dict attribute 'design'.")
    for source in (carried or {}, given or {}):
        for name, value in source.items():
            if name not in known:
                if source is carried:
                    raise UsageError("the driver's design", f"a statement of this case "
                                     f"({', '.join(known) or 'none'})", name,
                                     "Name one the case lists (peakproof run --help shows them).")
                continue  # an option of another kind (the given options hold every case option)
            if value is None or value is False:
                continue
            stated[name] = known[name].parse(value)
    return StatedDesign(statements, stated)


__all__ = ["Statement", "StatedDesign", "design_options", "stated_design"]
