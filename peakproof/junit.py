"""A verdict as JUnit XML, the format CI systems read (GitLab, Jenkins, GitHub's test reporters, Buildkite).

One ``<testsuite>`` per stage of a run (the properties, the contract, each load scenario, an
in-process stage) and, in it, one ``<testcase>`` per check and service level: a broken promise
is a ``<failure>`` whose message is the check's Actual / Limit line, an undecided one is
``<skipped>`` with the reason it was not decided (INCONCLUSIVE is never a pass, nor a failure of the
target), a waived one is ``<skipped>`` too. A stage whose own outcome says more than its checks
(a generator that fell behind the curve, a stage that raised, a properties run in which a check had
no chance) gets one more test case, named after the stage, carrying that outcome and its reasons.
The properties' own test cases (pytest's ``--junitxml`` of the child run) are folded into their
stage's suite.

GitLab publishes no XSD; its parser (``lib/gitlab/ci/parsers/test/junit.rb``) reads ``testsuites`` >
``testsuite`` (nested allowed) > ``testcase`` with ``name``, ``classname``, ``file``, ``time`` and a
``failure``, ``error`` or ``skipped`` child whose text it shows. ``tests/support/junit.xsd`` states
that structure (the Ant/Jenkins JUnit form), and the tests validate every file written here against it.

Pure but for :func:`write`: no Locust, no pytest.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .checks import CheckResult
from .verdict import Outcome, Verdict, judge_results

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0 (a target's garbage echoed)


def _text(s: object) -> str:
    return _CONTROL.sub("?", str(s))


@dataclass
class Stage:
    """One stage of a run, as the verdict shows it."""

    name: str
    outcome: Outcome
    results: list[CheckResult] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0
    skipped: bool = False  # the stage did not run at all
    cases: list[ET.Element] = field(default_factory=list)  # test cases of its own (pytest's, for the properties)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "stage"


def check_case(result: CheckResult, classname: str) -> ET.Element:
    """One check or service level as a test case: passed, failure (Actual / Limit), or skipped (why)."""
    tc = ET.Element("testcase", name=result.name, classname=classname, time="0")
    line = _text(result.line().splitlines()[0])
    body = _text(result.summary())
    if result.valid is False:
        failure = ET.SubElement(tc, "failure", message=line, type="FAIL")
        failure.text = body
    elif result.valid != True:  # noqa: E712 - "unknown" and "waived" are both truthy strings
        why = _text(result.why() or ("waived" if result.valid == "waived" else "not decided"))
        skipped = ET.SubElement(tc, "skipped", message=f"{'waived' if result.valid == 'waived' else 'INCONCLUSIVE'}: "
                                                       f"{why}")
        skipped.text = body
    else:
        out = ET.SubElement(tc, "system-out")
        out.text = body
    return tc


def _stage_case(stage: Stage, classname: str) -> ET.Element:
    tc = ET.Element("testcase", name=stage.name, classname=classname, time=f"{stage.seconds:.3f}")
    why = _text("; ".join(stage.reasons) or stage.detail or str(stage.outcome))
    if stage.skipped:
        ET.SubElement(tc, "skipped", message=f"not run: {why}").text = _text(stage.detail)
    elif stage.outcome is Outcome.FAIL:
        ET.SubElement(tc, "failure", message=why, type="FAIL").text = _text(stage.detail)
    elif stage.outcome is Outcome.INCONCLUSIVE:
        ET.SubElement(tc, "skipped", message=f"INCONCLUSIVE: {why}").text = _text(stage.detail)
    else:
        ET.SubElement(tc, "system-out").text = _text(stage.detail)
    return tc


def stage_suite(stage: Stage, case: str) -> ET.Element:
    """A stage as a ``<testsuite>``: its checks and service levels, its own test cases, and the stage's own
    outcome where its checks alone would not show it."""
    classname = f"peakproof.{case}.{_slug(stage.name)}"
    cases = [*stage.cases, *(check_case(r, classname) for r in stage.results)]
    own = stage.skipped or not cases or judge_results(stage.results).outcome is not stage.outcome
    if own:
        cases.append(_stage_case(stage, classname))
    suite = ET.Element("testsuite", name=f"peakproof {case}: {stage.name}", tests=str(len(cases)),
                       failures=str(sum(tc.find("failure") is not None for tc in cases)),
                       errors=str(sum(tc.find("error") is not None for tc in cases)),
                       skipped=str(sum(tc.find("skipped") is not None for tc in cases)),
                       time=f"{stage.seconds:.3f}")
    suite.extend(cases)
    return suite


def document(case: str, stages: Iterable[Stage], outcome: Outcome, seconds: float) -> ET.ElementTree:
    """The whole verdict: ``<testsuites>`` named after the case and its outcome."""
    suites = [stage_suite(s, case) for s in stages]
    root = ET.Element("testsuites", name=f"peakproof {case}: {outcome}",
                      tests=str(sum(int(s.get("tests", "0")) for s in suites)),
                      failures=str(sum(int(s.get("failures", "0")) for s in suites)),
                      errors=str(sum(int(s.get("errors", "0")) for s in suites)),
                      skipped=str(sum(int(s.get("skipped", "0")) for s in suites)),
                      time=f"{seconds:.3f}")
    root.extend(suites)
    ET.indent(root)
    return ET.ElementTree(root)


def write(path: str | Path, case: str, stages: Iterable[Stage], outcome: Outcome, seconds: float) -> Path:
    """Write the verdict's JUnit XML to ``path`` (its folder made if missing)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    document(case, stages, outcome, seconds).write(p, encoding="utf-8", xml_declaration=True)
    return p


def pytest_cases(path: str | Path, prefix: str) -> list[ET.Element]:
    """The test cases of a pytest ``--junitxml`` file, their class names under ``prefix`` (the properties'
    own, folded into their stage's suite); [] when the file is missing or unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for tc in root.iter("testcase"):
        # pytest names the class by the file's path from its rootdir: from an installed package that is the
        # whole way into site-packages; the test module onwards says all there is
        parts = tc.get("classname", "").split(".")
        start = next((i for i, part in enumerate(parts) if part.startswith("test_")), 0)
        tc.set("classname", ".".join([prefix, *[part for part in parts[start:] if part]]))
        for extra in [e for e in tc if e.tag not in ("failure", "error", "skipped", "system-out", "system-err")]:
            tc.remove(extra)  # pytest's <properties> per test: outside the schema CI systems read
        out.append(tc)
    return out


def write_scenario(path: str | Path, case: str, scenario: str, verdict: "Verdict", results: list[CheckResult],
                   report: str | Path, seconds: float) -> Path:
    """A load scenario's verdict alone (``locust -f ... --junit FILE``): one stage, its checks and service levels."""
    stage = Stage(f"load scenario {scenario} (Locust, open model)", verdict.outcome, results, list(verdict.reasons),
                  f"report {report}", seconds)
    return write(path, case, [stage], verdict.outcome, seconds)
