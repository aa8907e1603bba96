"""Check results: what a checker (a pure function of a history) returns.

``valid`` is True, False, or "unknown" (the history cannot decide, e.g. because operations
whose outcome is unknown could explain it either way, or because nothing in it could have
violated the promise). A result carries counts, the first violation as a readable sentence
plus its operations, a few examples, and its *chances*: how many operations could have
violated the promise (late confirms for "an expired hold is never sold", replays for
idempotency). A check with zero chances was not exercised: it says nothing, so it is
"unknown", never True (a check that had no chance to fail must not count as a pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, Iterable, Iterator, Literal, TypeVar

from .timefmt import moment

Validity = bool | Literal["unknown", "waived"]  # waived: undecided, and the user said why (--without)

UNITS = ("s", "share", "count", "violations")


@dataclass(frozen=True)
class Measure:
    """A number with its unit, and for a limit how the actual must compare with it.

    ``unit``: ``s`` (seconds; shown in ms below 1 s), ``share`` (0..1; shown as a percent),
    ``count`` or ``violations``. ``value`` is a number, or (low, high) for a range limit.
    ``cmp``: ``<=``, ``>=``, ``=`` or ``in`` (a range), for a limit; empty for an actual.
    """

    value: Any
    unit: str
    cmp: str = ""

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}; got {self.unit!r}")

    def render(self) -> str:
        """The one text form of a measure: the terminal, the report and the verdict all use it."""
        if self.cmp == "in":
            lo, hi = self.value
            return f"{_one(lo, self.unit)} to {_one(hi, self.unit)}"
        text = _one(self.value, self.unit)
        return f"{self.cmp} {text}" if self.cmp and self.cmp != "=" else text

    def to_json(self) -> dict[str, Any]:
        return {"value": list(self.value) if isinstance(self.value, tuple) else self.value, "unit": self.unit,
                "cmp": self.cmp}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Measure | None":
        if not d:
            return None
        v = d["value"]
        return cls(tuple(v) if isinstance(v, list) else v, d["unit"], d.get("cmp", ""))


def _one(v: Any, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:,.1f} ms" if abs(v) < 1 else f"{v:,.2f} s"
    if unit == "share":
        return f"{v:.2%}"
    if unit == "violations":
        return f"{v:,} violation{'s' if v != 1 else ''}"
    return f"{v:,}"


DueEnd = Literal["held", "violated", "undecided"]
DUE_KEPT = 500  # due moments a result's JSON keeps (the violated first): a feed run has one per reader and post


@dataclass(frozen=True)
class Due:
    """A moment at which the stated rules made something due (a breaker open, a lapsed hold's units
    back, a post visible), and how it ended: ``held`` (done in time), ``violated`` (not done:
    ``detail`` says what happened instead) or ``undecided`` (``detail`` says why it could not be
    judged). ``at`` is epoch seconds, on the clock the history and the record were kept by."""

    what: str
    at: float
    ended: DueEnd
    detail: str = ""

    def line(self) -> str:
        return f"{self.ended}: {self.what}, due at {moment(self.at)}" + (f": {self.detail}" if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "at": self.at, "ended": self.ended, "detail": self.detail}


def due_counts(due: Iterable[Due]) -> dict[str, int]:
    """How the due moments ended: {"held": n, "violated": n, "undecided": n} (every key, zeros too)."""
    out = {"held": 0, "violated": 0, "undecided": 0}
    for d in due:
        out[d.ended] += 1
    return out


@dataclass
class CheckResult:
    name: str
    valid: Validity
    counts: dict[str, Any] = field(default_factory=dict)
    first_violation: str | None = None
    examples: list[Any] = field(default_factory=list)
    note: str | None = None
    chances: int | None = None  # operations that could have violated it; None: not counted
    chance_kind: str = ""  # what a chance is, e.g. "late confirms"
    actual: Measure | None = None  # what was measured (None: an invariant, counted in violations)
    limit: Measure | None = None
    due: list[Due] = field(default_factory=list)  # the moments the rules made the promise due, each as it ended
    due_total: dict[str, int] | None = None  # how every due moment ended, when ``due`` holds only some (from JSON)

    @property
    def failed(self) -> bool:
        return self.valid is False

    @property
    def decided(self) -> bool:
        return isinstance(self.valid, bool)

    @property
    def exercised(self) -> bool:
        return self.chances is None or self.chances > 0

    def summary(self) -> str:
        mark = {True: "ok", False: "FAIL", "unknown": "unknown", "waived": "waived"}[self.valid]
        counts = ", ".join(f"{k} {_fmt(v)}" for k, v in self.counts.items())
        text = f"{self.name}: {mark}" + (f" ({counts})" if counts else "")
        if self.actual is not None or self.limit is not None:
            actual, limit = self.actual_limit()
            text += f"\n  Actual {actual} / Limit {limit}"
        if self.first_violation:
            text += f"\n  first violation: {self.first_violation}"
            for ex in self.examples[:3]:
                text += f"\n    {ex!r}"
        if self.chances is not None:
            text += f"\n  chances: {self.chances:,} {self.chance_kind}".rstrip()
        if self.due:
            text += "\n  due: " + ", ".join(f"{n:,} {end}" for end, n in self.due_ended().items() if n)
            text += "".join(f"\n    {d.line()}" for d in self.due_kept(3))
        if self.note:
            text += f"\n  note: {self.note}"
        return text

    def actual_limit(self) -> tuple[str, str]:
        """(Actual, Limit) as text, rendered from the typed measures: the one rendering the
        terminal, the report and the verdict share. An invariant's actual is its violations."""
        if self.actual is not None or self.limit is not None:  # a measured promise (an SLO, a share)
            return (self.actual.render() if self.actual is not None else "-",
                    self.limit.render() if self.limit is not None else "-")
        c = self.counts
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in c.items() if k != "violations")
        actual = Measure(int(c.get("violations", 0)), "violations").render()
        return actual + (f" ({shown})" if shown else ""), Measure(0, "violations").render()

    def line(self) -> str:
        """One terminal line: mark, name, Actual / Limit, chances, and why."""
        mark = {True: "ok", False: "FAIL", "unknown": "??", "waived": "waived"}[self.valid]
        actual, limit = self.actual_limit()
        text = f"[{mark}] {self.name}: Actual {actual} / Limit {limit}"
        if self.chances is not None:
            text += f"; chances {self.chances:,} {self.chance_kind}".rstrip()
        if self.due:
            text += "; due moments: " + ", ".join(f"{n:,} {end}" for end, n in self.due_ended().items() if n)
        why = self.why()
        text += f"\n      {why}" if why else ""
        if self.failed and self.note and self.note != why:  # a FAIL's note: what would explain it (peakproof.design)
            text += f"\n      note: {self.note}"
        return text

    def due_ended(self) -> dict[str, int]:
        """How the due moments ended: {"held": n, "violated": n, "undecided": n}."""
        return dict(self.due_total) if self.due_total is not None else due_counts(self.due)

    def due_kept(self, n: int = DUE_KEPT) -> list[Due]:
        """The first ``n`` due moments worth reading: the violated ones first, then by time."""
        return sorted(self.due, key=lambda d: (d.ended != "violated", d.at))[:n]

    def why(self) -> str | None:
        """What to read first: the violation when it failed, the reason when it is undecided."""
        if self.valid == "unknown":
            return self.note or self.first_violation
        return self.first_violation or self.note

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "valid": self.valid, "counts": self.counts,
                "first_violation": self.first_violation,
                "examples": [repr(e) for e in self.examples[:5]], "note": self.note,
                "chances": self.chances, "chance_kind": self.chance_kind,
                "actual": self.actual.to_json() if self.actual else None,
                "limit": self.limit.to_json() if self.limit else None,
                **({"due": [d.to_json() for d in self.due_kept()], "due_total": self.due_ended()} if self.due else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CheckResult":
        return cls(d["name"], d["valid"], d.get("counts", {}), d.get("first_violation"), d.get("examples", []),
                   d.get("note"), d.get("chances"), d.get("chance_kind", ""), Measure.from_json(d.get("actual")),
                   Measure.from_json(d.get("limit")),
                   [Due(x["what"], x["at"], x["ended"], x.get("detail", "")) for x in d.get("due") or ()],
                   d.get("due_total"))


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

    def result(self, name: str, counts: dict[str, Any], unknown: bool = False, note: str | None = None, *,
               chances: int | None = None, chance_kind: str = "", due: list[Due] | None = None) -> CheckResult:
        """False on any violation; else "unknown" when ``unknown`` or when ``chances`` is 0
        (nothing could have violated it: not exercised); else True."""
        if self.count:
            valid: Validity = False
        elif chances == 0:
            valid = "unknown"
            note = note or f"not exercised: no {chance_kind or 'operation that could violate it'} in the history"
        else:
            valid = "unknown" if unknown else True
        return CheckResult(name, valid, {**counts, "violations": self.count}, self.first, self.examples, note,
                           chances, chance_kind, due=list(due or ()))


def judge_answer(op: Any, asked: dict[str, Any], v: Violations) -> bool:
    """Compare the fields an answer reports (``op.value``) with what its request asked: each one that
    differs is a violation "answered about another request". False when the answer reports none of
    them (a driver that leaves them out: nothing to judge)."""
    told = {k: op.value.get(k) for k in asked if op.value.get(k) is not None}
    if not told:
        return False
    wrong = {k: (asked[k], told[k]) for k in told if told[k] != asked[k]}
    if wrong:
        v.add(f"{op.f} answered about another request: "
              + ", ".join(f"{k} asked {want!r}, answered {got!r}" for k, (want, got) in wrong.items()), op)
    return True


A = TypeVar("A")
Check = Callable[[A], "CheckResult"]


class CheckRegistry(Generic[A]):
    """A case's checks over its analysis type ``A``, registered where each is written (as
    Schemathesis registers its checks): ``@TICKETS.register`` above the function. The case
    package imports its promise modules and reads the list from here, in the order they
    registered; nothing lists the checks by hand, so a promise module cannot be left out."""

    def __init__(self, case: str) -> None:
        self.case = case
        self._checks: dict[str, Check[A]] = {}
        self._groups: dict[str, set[str]] = {}

    def register(self, check: Check[A] | None = None, *,
                 groups: tuple[str, ...] = ()) -> Any:
        """``@TICKETS.register`` above a check, or ``@TICKETS.register(groups=("opening",))``: a check may
        belong to named groups (the promises a stage judges), read back by :meth:`group`."""
        def add(c: Check[A]) -> Check[A]:
            # a re-imported module replaces its own entry in place: the order stays the order written
            self._checks[c.__name__] = c
            for g in groups:
                self._groups.setdefault(g, set()).add(c.__name__)
            return c
        return add if check is None else add(check)

    def group(self, name: str) -> tuple[str, ...]:
        """The checks of group ``name``, in the order they registered."""
        if name not in self._groups:
            raise KeyError(f"{self.case} has no check group {name!r}; its groups: {', '.join(sorted(self._groups))}")
        return tuple(n for n in self._checks if n in self._groups[name])

    def __iter__(self) -> Iterator[Check[A]]:
        return iter(tuple(self._checks.values()))

    def __len__(self) -> int:
        return len(self._checks)

    def names(self) -> list[str]:
        return list(self._checks)

    def run(self, analysis: A) -> list["CheckResult"]:
        """Every registered check over one shared analysis."""
        return [check(analysis) for check in self]


@dataclass
class ChanceTally:
    """The most chances each check had in one judgement, over a session (a pytest session keeps its
    own, on its plugin object): ``exercised`` for every judgement, ``in_properties`` for those made
    while a test in ``properties/`` ran. A check judged there with no chance over the whole session
    was not tested, and the property run says so with its own exit code.

    ``summed``: the chances of every Hypothesis example, each example's most, added up (what a run's
    examples together put to the test; "the most one judgement had" is the largest example's alone,
    and moves with the sizes Hypothesis draws). Judgements outside an example count as one each."""

    exercised: dict[str, int] = field(default_factory=dict)
    in_properties: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (most, what a chance is)
    in_property: bool = False  # set while a property test runs
    summed: dict[str, int] = field(default_factory=dict)  # the examples ended, each one's most, added up
    # each case's stated design (peakproof.design.StatedDesign), by case: a property's judgement leaves out what
    # the product's design makes meaningless, as the load's judge does (set by the properties' target fixture)
    designs: dict[str, Any] = field(default_factory=dict)
    # checks a property of this session found broken already (name -> why they are not judged again): every
    # other promise is then judged on its own, the broken one's first violation kept (peakproof.realtime)
    excused: dict[str, str] = field(default_factory=dict)
    _example: Any = None  # the Hypothesis example judged last (kept, so that its identity is never reused)
    _example_most: dict[str, int] = field(default_factory=dict)

    def record(self, results: Iterable["CheckResult"]) -> None:
        example = _current_example()
        if example is None or example is not self._example:
            self._end_example()
            self._example = example
        for r in results:
            if r.chances is None or r.valid == "waived":  # left out (a stated design): nothing was put to the test
                continue
            self._example_most[r.name] = max(self._example_most.get(r.name, 0), r.chances)
            self.exercised[r.name] = max(self.exercised.get(r.name, 0), r.chances)
            if self.in_property:
                seen = self.in_properties.get(r.name, (0, r.chance_kind))[0]
                self.in_properties[r.name] = (max(seen, r.chances), r.chance_kind)
        if example is None:
            self._end_example()

    def _end_example(self) -> None:
        for name, n in self._example_most.items():
            self.summed[name] = self.summed.get(name, 0) + n
        self._example_most = {}
        self._example = None

    def summed_over_examples(self) -> dict[str, int]:
        """``summed``, the example judged last included."""
        return {name: self.summed.get(name, 0) + self._example_most.get(name, 0)
                for name in {*self.summed, *self._example_most}}


def _current_example() -> Any:
    """The Hypothesis example being run (its build context), or None outside one."""
    try:
        from hypothesis.control import _current_build_context
    except ImportError:  # pragma: no cover - hypothesis is a dependency; its private name may move
        return None
    return _current_build_context.value


# Where judgements are tallied: the process's own at the bottom; a pytest session pushes its plugin's
# tally when it starts and pops it when it ends (a pytester session inside another keeps its own).
_TALLIES: list[ChanceTally] = [ChanceTally()]


def current_tally() -> ChanceTally:
    return _TALLIES[-1]


def push_tally(tally: ChanceTally) -> None:
    _TALLIES.append(tally)


def pop_tally(tally: ChanceTally) -> None:
    if tally in _TALLIES[1:]:
        _TALLIES.remove(tally)


def record_chances(results: Iterable[CheckResult]) -> None:
    current_tally().record(results)


class ChecksFailed(AssertionError):
    """:func:`assert_checks`' failure, naming the checks that failed (a run that goes on judges the others)."""

    def __init__(self, text: str, checks: Iterable[str]) -> None:
        super().__init__(text)
        self.checks = tuple(checks)


class NotDecided(AssertionError):
    """Checks a test relies on came out undecided (unknown, no chance to fail, or absent) and none
    failed: the test says nothing about the target. An AssertionError for a plain test; the
    properties' plugin reads it as INCONCLUSIVE, never as a broken promise."""


def assert_checks(results: Iterable[CheckResult], *, decided: bool | str | Iterable[str] = ()) -> None:
    """Raise AssertionError naming every failed check (for tests and properties); note their chances.

    By default a check that came out "unknown" passes (a property step judges a history that
    may not have exercised every check yet). ``decided`` names the checks a test relies on
    (``decided=("no_oversell", "stock_is_conserved")``; ``True``: every result): each must be
    among ``results``, decided (True or False, never "unknown") and exercised (not zero
    chances to fail), or the AssertionError names it and says why (:class:`NotDecided` when
    nothing failed).
    """
    results = list(results)
    tally = current_tally()
    for design in tally.designs.values():  # what the product's stated design leaves out, left out
        results = design.apply(results)
    if tally.excused:  # broken already in this session, its first violation kept: the others judged on their own
        results = [replace(r, valid="waived", note=tally.excused[r.name]) if r.failed and r.name in tally.excused
                   else r for r in results]
    record_chances(results)
    failed = [r for r in results if r.failed]
    if decided is True:
        wanted = [r.name for r in results]
    elif decided is False:
        wanted = []
    else:
        wanted = [decided] if isinstance(decided, str) else list(decided)
    wanted = [name for name in wanted if not any(r.name == name and r.valid == "waived" for r in results)]
    by_name = {r.name: r for r in results}
    missing = [name for name in wanted if name not in by_name]
    undecided = [by_name[name] for name in wanted
                 if name in by_name and not by_name[name].failed
                 and not (by_name[name].decided and by_name[name].exercised)]
    if failed or missing or undecided:
        parts = [r.summary() for r in failed]
        if undecided:
            parts.append("checks this test relies on were not decided (unknown, or no chance to fail):")
            parts += [r.summary() for r in undecided]
        if missing:
            parts.append(f"checks this test relies on are not among the results: {', '.join(missing)} "
                         f"(the results are: {', '.join(by_name) or 'none'})")
        if failed:
            raise ChecksFailed("\n".join(parts), [r.name for r in failed])
        raise NotDecided("\n".join(parts))



def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
