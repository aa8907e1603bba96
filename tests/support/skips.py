"""Why a test of this suite skipped: every skip has a reason class, declared here as data (:data:`REASONS`),
and CI gates on a session's skips (``python -m tests.support.skips gate FILE``).

A skip is a test that did not decide: harmless when the test is one that runs only when asked, or a property
of the installed plugin that does not apply here, a hidden regression when the test exists to show a PASS or
a FAIL (a harness that answers "undecided" too often shows only as skips). So:

* the harness's own tests say their class: :func:`skip` (``skip("platform", why)``) and a ``[class] `` prefix
  on a ``skipif``'s reason (:func:`reason` writes it); tests/unit/test_skips.py scans every skip site;
* the plugin's skips (peakproof/pytest_plugin.py, peakproof/cases/*/properties*.py) keep the words its users
  read: they are classified by their pattern (:data:`PATTERNS`);
* a test marked ``decides`` exists to show a PASS or a FAIL: any skip of it counts as "must decide";
* tests/conftest.py registers a :class:`SessionSkips` where every report arrives (under pytest -n, the
  controller): each skip's node id, class and message, the counts per class printed at the session's end and
  written to ``PEAKPROOF_SKIP_RECORD`` as JSON; :func:`verdict` judges
  such a record: a must-decide skip, an unclassified one, a class over its budget, or no record at all
  fails CI's step.

Standard library only (pytest imported when a test skips): CI's gate runs it with nothing installed.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn


@dataclass(frozen=True)
class Reason:
    name: str
    meaning: str  # one line
    must_decide: bool  # a skip of this class in CI is a test that must decide and did not
    budget: int  # the most skips of this class CI accepts in one session


REASONS: dict[str, Reason] = {r.name: r for r in (
    Reason("undecided", "a run this machine left undecided (a neighbour took the CPU the load needed; a property "
           "stopped short of a verdict: the harness's own time limit, a flaky replay, a crash of the harness)",
           must_decide=True, budget=0),
    # the held-out rules (tests/quality/test_held_out_rules.py: three tests, 4 min of real time), PEAKPROOF_HELD_OUT=1
    Reason("opt-in", "a test that runs only when asked (PEAKPROOF_HELD_OUT=1)", must_decide=False, budget=3),
    # a root Linux CI machine with the test extra installed skips none
    Reason("platform", "the machine lacks what the test needs (Linux's /proc, root, the test extra)",
           must_decide=False, budget=0),
    # the properties tier in process: the feed's and the notifications' over-HTTP properties, which need --target-url
    Reason("not-applicable", "a property of the installed plugin that does not apply to the target it runs against "
           "(over a URL or in process only, a capability the driver lacks or --without waived, another case's URL)",
           must_decide=False, budget=2),
    Reason("unclassified", "a skip whose message matches no class: say its class (tests/support/skips.py)",
           must_decide=True, budget=0),
)}
UNCLASSIFIED = "unclassified"

# The plugin's skips, by their words (peakproof/pytest_plugin.py, peakproof/cases/*/properties*.py,
# peakproof/capabilities.py's sentences, peakproof/errors.py's OffContract, peakproof/contract.py's headline,
# peakproof/pytest_session.py's property turned INCONCLUSIVE): a message its users read is not changed to
# carry a class. tests/unit/test_skips.py classifies each one the code can say.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((kind, re.compile(p)) for kind, p in (
    ("not-applicable", r"^waived: --without \S+ \(the target has no "),
    ("not-applicable", r"\black(s)? the '[\w-]+' capability \("),
    ("not-applicable", r"^this target does not speak the \w+ contract: it answered "),
    ("not-applicable", r"^the target answered .* through your driver .*: it has no such route\."),
    ("not-applicable", r"^--spec \S+ is a run of the \w+ case$"),
    ("not-applicable", r"^--target-url \S+ serves the \w+ case; \w+ needs a URL ending in "),
    ("not-applicable", r"^an in-process property \(it controls the target's insides\); with --target-url "),
    ("not-applicable", r"^needs --target-url "),
    ("not-applicable", r"^the contract's wire-shape probes .* apply to the contract's API only; with --driver "),
    ("not-applicable", r"^interleavings step the reference core in-process; a URL cannot be stepped$"),
    ("not-applicable", r"^contract \(Schemathesis\): skipped: "),
    ("undecided", r"^INCONCLUSIVE: "),
    ("not-applicable", r"^not checked: "),  # left out by a product's stated design (peakproof.design)
    ("undecided", r"^past --max-wait \("),  # a wait longer than the user allows: its checks not decided by it
))

_PREFIX = re.compile(r"^\[([\w-]+)\] ")


def reason(kind: str, why: str) -> str:
    """A skip's message that carries its class: ``[kind] why`` (a ``skipif``'s reason)."""
    if kind not in REASONS or kind == UNCLASSIFIED:
        raise ValueError(f"{kind!r} is no skip class: one of {', '.join(k for k in REASONS if k != UNCLASSIFIED)}")
    return f"[{kind}] {why}"


def skip(kind: str, why: str) -> NoReturn:
    """Skip the running test, saying its class and why (the skip's line: the caller's)."""
    __tracebackhide__ = True
    import pytest

    pytest.skip(reason(kind, why))


def classify(message: str) -> str:
    """The class of a skip's message (as pytest reports it, ``Skipped: `` or not)."""
    text = message.strip()
    text = text[len("Skipped: "):] if text.startswith("Skipped: ") else text
    stated = _PREFIX.match(text)
    if stated:
        return stated.group(1) if stated.group(1) in REASONS else UNCLASSIFIED
    return next((kind for kind, pattern in PATTERNS if pattern.search(text)), UNCLASSIFIED)


def skip_message(report: Any) -> str:
    """What a skipped test report says (its longrepr: a (path, line, message) triple, or text)."""
    longrepr = report.longrepr
    if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3:
        longrepr = longrepr[2]
    text = str(longrepr or "")
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


# -- a session's record: tests/conftest.py keeps it, CI's gate judges it ---------------------------------------


@dataclass
class Skipped:
    nodeid: str
    kind: str
    message: str
    decides: bool  # the test is marked decides

    @property
    def must_decide(self) -> bool:
        return self.decides or REASONS.get(self.kind, REASONS[UNCLASSIFIED]).must_decide

    def to_json(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, "class": self.kind, "message": self.message, "decides": self.decides}

    def line(self) -> str:
        marked = ", marked decides" if self.decides else ""
        return f"{self.nodeid} ({self.kind}{marked}): {self.message[:400]}"


def counts(skips: list[Skipped]) -> dict[str, int]:
    return {kind: sum(s.kind == kind for s in skips) for kind in REASONS}


def counts_line(skips: list[Skipped]) -> str:
    return "skips by reason: " + ", ".join(f"{kind} {n}" for kind, n in counts(skips).items())


def record(skips: list[Skipped], exitstatus: int, tests: int) -> dict[str, Any]:
    """The JSON CI's gate reads: the session's exit status, how many tests reported, each skip."""
    return {"exitstatus": exitstatus, "tests": tests, "counts": counts(skips),
            "budgets": {r.name: r.budget for r in REASONS.values()}, "skips": [s.to_json() for s in skips]}


def from_record(doc: dict[str, Any]) -> list[Skipped]:
    # the class from the record's message again, where the record's is none this module knows (an older gate)
    return [Skipped(s["nodeid"], s["class"] if s.get("class") in REASONS else classify(s["message"]), s["message"],
                    bool(s.get("decides"))) for s in doc.get("skips", [])]


class SessionSkips:
    """One session's skips, a plugin tests/conftest.py registers in the session a user or CI started (under
    pytest -n the controller, which every worker's reports reach; a report's ``keywords`` hold its markers):
    each skipped test's node id, class and message, written as JSON to ``path`` at the session's end."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.skipped: dict[str, Skipped] = {}
        self.tests: set[str] = set()

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.tests.add(report.nodeid)
        self._keep(report)

    def pytest_collectreport(self, report: Any) -> None:
        self._keep(report)  # a module skipped whole (pytest.importorskip, skip(allow_module_level=True))

    def _keep(self, report: Any) -> None:
        # an xfail is reported skipped too: not a skip
        if report.skipped and not hasattr(report, "wasxfail") and report.nodeid not in self.skipped:
            message = skip_message(report)
            self.skipped[report.nodeid] = Skipped(report.nodeid, classify(message), message,
                                                  "decides" in (getattr(report, "keywords", None) or {}))

    def pytest_sessionfinish(self, exitstatus: int) -> None:
        if self.path:
            doc = record(list(self.skipped.values()), int(exitstatus), len(self.tests))
            Path(self.path).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")

    def summary(self) -> list[str]:
        """The counts per class, then each skip of a test that must decide or of no class."""
        found = list(self.skipped.values())
        return [counts_line(found)] + [f"  {'of no class' if s.kind == UNCLASSIFIED else 'must decide'}: {s.line()}"
                                       for s in found if s.must_decide]


def verdict(doc: dict[str, Any] | None, where: str = "the record") -> tuple[list[str], str]:
    """CI's judgement of one session's record (None: there is none): what fails it ([] when nothing does),
    and the counts per reason (or why there are none)."""
    if doc is None:
        return ([f"no skip record: {where} was not written (pytest ended before its session's end: a crash, "
                 f"or it never started); its skips are unknown, not zero"],
                f"skips by reason: unknown, no record ({where})")
    skips = from_record(doc)
    if not doc.get("tests") and not skips:
        status = doc.get("exitstatus")
        return ([f"no test ran (pytest's exit {status}): no skip could be counted"],
                f"skips by reason: none counted, no test ran (exit {status})")
    problems = [f"must decide, and skipped: {s.line()}" for s in skips if s.must_decide and s.kind != UNCLASSIFIED]
    problems += [f"a skip of no class: {s.line()}" for s in skips if s.kind == UNCLASSIFIED]
    for kind, n in counts(skips).items():
        budget = REASONS[kind].budget
        if n > budget and not REASONS[kind].must_decide:
            problems.append(f"{n} skips of class {kind}, CI accepts {budget} ({REASONS[kind].meaning}):\n"
                            + "\n".join(f"    {s.line()}" for s in skips if s.kind == kind))
    return problems, counts_line(skips)


def load(path: str | Path) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def main(argv: list[str]) -> int:
    """``gate FILE [STEP]``: the verdict on a record, its counts last (exit 1 when it fails);
    ``counts FILE [STEP]``: the counts alone (exit 0)."""
    if len(argv) not in (2, 3) or argv[0] not in ("gate", "counts"):
        print("usage: python -m tests.support.skips gate|counts FILE [STEP]", file=sys.stderr)
        return 2
    command, path, step = argv[0], argv[1], (argv[2] if len(argv) == 3 else "")
    named = f"{step}: " if step else ""
    try:
        doc = load(path)
    except (OSError, ValueError) as e:
        print(f"ci: {named}skips by reason: unknown, the record {path} could not be read: {e}")
        return 1
    problems, line = verdict(doc, path)
    if command == "counts":
        print(f"ci: {named}{line}")
        return 0
    for problem in problems:
        print(f"ci: {named}skips fail the step: {problem}")
    print(f"ci: {named}{line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
