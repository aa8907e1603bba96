"""Capabilities: what a driver may offer beyond the case's operations, and what lacking one costs.

A case's operations (its driver ``Protocol``) are what a service must offer. A
:class:`Capability` is optional: set-up, the target's own counters, fault hooks, the
providers' record, bulk loading. A driver lacks one when it has none of the methods, or
when the target answers a capability's call with 404 / 405 / 501 (it has no such route).
A missing capability never crashes a run and never passes one: the checks it feeds are
undecided, each saying which capability is missing (INCONCLUSIVE). A user who knows their
service has no such thing waives it (``--without NAME``): those checks are then
``waived``, listed in the verdict, and no longer hold the run back.

Pure: no I/O; the judge and the properties' summary call :func:`apply_waivers`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from .checks import CheckResult
from .errors import TargetError, UsageError
from .history import Op


@dataclass(frozen=True)
class Capability:
    name: str
    what: str  # one phrase: what it is
    methods: tuple[str, ...] = ()  # driver methods that provide it (none: a field of the operations' answers)
    checks: tuple[str, ...] = ()  # checks that cannot be decided without it
    limits: str = ""  # what else goes without it (a scenario, a chart)
    option: str = ""  # a case option through which the harness itself provides it (providers: --provider-url)

    def sentence(self, driver: str = "the driver") -> str:
        left = f"; it leaves undecided: {', '.join(self.checks)}" if self.checks else ""
        extra = f"; without it, {self.limits}" if self.limits else ""
        if not self.methods:  # a field of the answers: the target's to give, the driver's to pass on
            return (f"the target's answers lack the '{self.name}' capability ({self.what}){left}{extra}. If your "
                    f"service has it, pass it on in the driver's values; if it has no such thing, waive it with "
                    f"--without {self.name}")
        return (f"{driver} lacks the '{self.name}' capability ({self.what}; methods {', '.join(self.methods)})"
                f"{left}{extra}. Give the driver those methods, or, if your service has no such thing, waive it "
                f"with --without {self.name}")


class CapabilityMissing(TargetError):
    """A stage cannot go on without a capability the driver or the target lacks (a finding:
    INCONCLUSIVE, naming it; never FAIL)."""

    def __init__(self, capability: Capability, detail: str = "", driver: str = "the driver") -> None:
        self.capability = capability
        super().__init__(capability.sentence(driver) + (f" ({detail})" if detail else ""))


# a call the target has no route for: its API has no such capability (or another shape)
NO_ROUTE = frozenset({"http_404", "http_405", "http_501"})


def no_route(op: Op) -> bool:
    return op.type != "ok" and op.value in NO_ROUTE


def offers(driver: Any, capability: Capability, spec: Any = None) -> bool:
    """Does ``driver`` have every method of ``capability`` (or the run's ``spec`` provide it through
    the capability's option), and not disown it (``without``)?"""
    if capability.name in set(getattr(driver, "without", ()) or ()):
        return False
    if capability.option and spec is not None and spec.opt(capability.option):
        return True
    return all(callable(getattr(driver, m, None)) for m in capability.methods)


def validate_waivers(case: str, capabilities: Iterable[Capability], without: Iterable[str]) -> tuple[str, ...]:
    """``--without`` names, checked against the case's capabilities (a typo is a usage error)."""
    known = {c.name: c for c in capabilities}
    out = tuple(without or ())
    bad = [w for w in out if w not in known]
    if bad:
        raise UsageError("--without", f"a capability of the {case} case ({', '.join(known) or 'none'})",
                         bad[0], "Name one the case lists (peakproof driver check shows what your driver offers).")
    return out


def apply_waivers(results: Iterable[CheckResult], capabilities: Iterable[Capability], without: Iterable[str],
                  lacking: Iterable[str] = ()) -> list[CheckResult]:
    """Undecided checks fed by a waived capability become ``waived``; those fed by a lacking one
    (not waived) say so in their note, so the INCONCLUSIVE names the capability and its waiver."""
    caps = list(capabilities)
    waived = set(without or ())
    lack = set(lacking or ()) - waived
    out = []
    for r in results:
        if r.decided:
            out.append(r)
            continue
        feeding = [c for c in caps if r.name in c.checks]
        hit = next((c for c in feeding if c.name in waived), None)
        if hit is not None:
            out.append(replace(r, valid="waived", note=f"waived with --without {hit.name} (the service has "
                                                         f"none); {r.note or 'not decided'}"))
            continue
        # a field capability shows only as its checks undecided: name it whenever they are
        missing = next((c for c in feeding if c.name in lack or not c.methods), None)
        if missing is not None:
            out.append(replace(r, note=f"{missing.sentence()}. {r.note or ''}".strip()))
        else:
            out.append(r)
    return out


def waiver_lines(capabilities: Iterable[Capability], without: Iterable[str],
                 results: Iterable[CheckResult] = ()) -> list[str]:
    """What the verdict lists about waivers: each waived capability and the checks it left undecided."""
    names = {r.name for r in results if r.valid == "waived"}
    lines = []
    for c in capabilities:
        if c.name in set(without or ()):
            left = [n for n in c.checks if n in names] or list(c.checks)
            lines.append(f"waived: {c.name} ({c.what}) with --without {c.name}"
                         + (f"; not checked: {', '.join(left)}" if left else ""))
    return lines


__all__ = ["Capability", "CapabilityMissing", "NO_ROUTE", "no_route", "offers", "validate_waivers",
           "apply_waivers", "waiver_lines"]
