"""Every skip has a reason class (tests/support/skips.py): the class of each message the suite and the plugin
can skip with, CI's gate on a session's record, and a scan of every skip site in the repository."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from peakproof.cases import all_cases
from peakproof.contract import ContractResult, contract_stage
from peakproof.errors import OffContract
from peakproof.realtime import Undecided, failure_kind
from peakproof.spec import RunSpec
from tests.support import skips
from tests.support.runs import ROOT, skip_when_a_neighbour_left_it_undecided

CLASSES = [k for k in skips.REASONS if k != skips.UNCLASSIFIED]

# -- the class of each message ----------------------------------------------------------------------------------


def skipped_with(call: object, *args: object) -> str:
    with pytest.raises(pytest.skip.Exception) as raised:
        call(*args)  # type: ignore[operator]
    return str(raised.value.msg)


def test_a_run_a_neighbour_left_undecided_skips_as_undecided_and_a_decided_one_does_not_skip() -> None:
    out = (2, "peakproof verdict for tickets: INCONCLUSIVE\n"
              "  not decided: a neighbour took CPU the run needed (the busiest over the stage: bash 2.3 s)\n")
    message = skipped_with(skip_when_a_neighbour_left_it_undecided, out)
    assert skips.classify(message) == "undecided" and "bash 2.3 s" in message, message
    assert skips.classify(f"Skipped: {message}") == "undecided"  # as pytest reports it
    skip_when_a_neighbour_left_it_undecided((1, out[1] + "[FAIL] no_oversell\n"))  # a FAIL is never excused
    skip_when_a_neighbour_left_it_undecided((2, out[1]), ["bash"])  # the target's own process: the harness's error


def test_the_harness_s_own_skips_say_their_class() -> None:
    for kind in CLASSES:
        assert skips.classify(skipped_with(skips.skip, kind, "why")) == kind
        assert skips.classify(skips.reason(kind, "why")) == kind == skips.classify(f"Skipped: [{kind}] why")
    for wrong in ("unclassified", "opt in", "platforms", ""):
        with pytest.raises(ValueError):
            skips.reason(wrong, "why")


# the plugin's skips as its users read them (peakproof/pytest_plugin.py, peakproof/cases/*/properties*.py),
# their values filled in; the ones built by other code are built by it below
PLUGIN_MESSAGES = [
    "waived: --without counters (the target has no counters of its own)",
    "--spec reports/feed-spec.json is a run of the feed case",
    "--target-url http://127.0.0.1:8000/feed serves the feed case; tickets needs a URL ending in /tickets "
    "(or one with no case path)",
    "an in-process property (it controls the target's insides); with --target-url its over-HTTP counterpart runs "
    "instead",
    "needs --target-url .../notifications and --provider-url",
    "needs --target-url .../feed (e.g. peakproof serve feed, then http://127.0.0.1:8000/feed)",
    "the contract's wire-shape probes (raw bodies, its error shape) apply to the contract's API only; with --driver "
    "the service speaks its own",
    "interleavings step the reference core in-process; a URL cannot be stepped",
]


def test_the_plugin_s_skips_are_not_applicable_by_their_words() -> None:
    for message in PLUGIN_MESSAGES:
        assert skips.classify(message) == "not-applicable", message
        assert skips.classify(f"Skipped: {message}") == "not-applicable", message


def test_a_capability_the_driver_lacks_and_a_target_off_its_contract_are_not_applicable() -> None:
    caps = [cap for case in all_cases().values() for cap in case.capabilities]
    assert any(c.methods for c in caps) and any(not c.methods for c in caps)  # both kinds of sentence
    for cap in caps:
        for driver in ("the driver mine:Driver", "the driver of the contract"):
            assert skips.classify(cap.sentence(driver)) == "not-applicable", cap.sentence(driver)
    for driver in (None, "mine:Driver"):
        message = str(OffContract("tickets", "PUT quota (set-up)", "HTTP 404", driver))
        assert skips.classify(message) == "not-applicable", message


def test_a_skipped_contract_stage_is_not_applicable(tmp_path: Path) -> None:
    spec = RunSpec(case="tickets", target_url="http://127.0.0.1:9/tickets", driver="mine:Driver")
    result = contract_stage(all_cases()["tickets"], spec, tmp_path)  # skipped before it reaches the URL
    assert result.skipped and skips.classify(result.headline()) == "not-applicable", result.headline()
    other = ContractResult("feed", "-", "in process", skipped="the feed case has no OpenAPI contract; pass --openapi")
    assert skips.classify(other.headline()) == "not-applicable"


def test_a_property_the_plugin_turned_inconclusive_is_undecided() -> None:
    # peakproof/pytest_session.py: what was not the target's (the harness's limit, a flaky replay, a crash of
    # the harness) is reported skipped with "INCONCLUSIVE: <reason>"
    for error in (RuntimeError("boom"), Undecided("the violation was not seen again in 3 replays"),
                  pytest.fail.Exception("Timeout (>1.5s) from pytest-timeout.")):
        kind, reason = failure_kind(error)
        assert kind != "violation" and skips.classify(f"INCONCLUSIVE: {reason}") == "undecided", reason


def test_a_skip_that_says_no_class_is_unclassified() -> None:
    for message in ("unconditional skip", "could not import 'xmlschema': No module named 'xmlschema'",
                    "[typo] reads Linux's /proc", "[unclassified] why", "not decided on this machine", "",
                    "condition: os.geteuid() != 0"):
        assert skips.classify(message) == skips.UNCLASSIFIED, message


# -- CI's gate on a session's record ---------------------------------------------------------------------------


def entry(nodeid: str, message: str, decides: bool = False) -> dict[str, object]:
    return {"nodeid": nodeid, "class": skips.classify(message), "message": message, "decides": decides}


HELD_OUT = [entry(f"tests/quality/test_held_out_rules.py::test_{i}", "[opt-in] PEAKPROOF_HELD_OUT=1 runs it")
            for i in range(3)]
OVER_HTTP = [entry("properties/test_feed.py::test_a_served_feed_matches_the_pull_model_over_http",
                   "needs --target-url .../feed (e.g. peakproof serve feed)"),
             entry("properties/test_notifications.py::test_a_served_target_keeps_every_invariant_over_http",
                   "needs --target-url .../notifications and --provider-url")]


def doc(*skipped: dict[str, object], exitstatus: int = 0, tests: int = 617) -> dict[str, object]:
    return {"exitstatus": exitstatus, "tests": tests, "skips": list(skipped)}


def test_what_a_quiet_ci_machine_skips_today_passes_the_gate() -> None:
    problems, line = skips.verdict(doc(*HELD_OUT, *OVER_HTTP))
    assert problems == [], problems
    assert line == "skips by reason: undecided 0, opt-in 3, platform 0, not-applicable 2, unclassified 0"
    assert skips.verdict(doc()) == ([], "skips by reason: undecided 0, opt-in 0, platform 0, not-applicable 0, "
                                        "unclassified 0")


def test_one_undecided_skip_fails_the_gate_naming_the_test_and_why() -> None:
    undecided = entry("tests/quality/test_slow_staging.py::test_a_load", "[undecided] not decided on this machine: "
                      "the run was INCONCLUSIVE naming a neighbour (bash 2.3 s)", decides=True)
    problems, line = skips.verdict(doc(*HELD_OUT, undecided))
    assert len(problems) == 1 and "test_slow_staging.py::test_a_load" in problems[0] and "bash 2.3 s" in problems[0]
    assert "undecided 1" in line


def test_any_skip_of_a_test_marked_decides_fails_the_gate_whatever_its_class() -> None:
    for message in ("[opt-in] asked for nothing", "[platform] reads Linux's /proc", "needs --target-url .../feed"):
        problems, _ = skips.verdict(doc(entry("tests/e2e/test_x.py::test_y", message, decides=True)))
        assert problems[0].startswith("must decide") and "test_x.py::test_y" in problems[0], problems
        assert len(problems) == 1 + (message.startswith("[platform]")), problems  # and platform's budget, 0


def test_a_skip_of_no_class_fails_the_gate() -> None:
    problems, line = skips.verdict(doc(*HELD_OUT, entry("tests/served/test_x.py::test_y", "unconditional skip")))
    assert len(problems) == 1 and "no class" in problems[0] and "unconditional skip" in problems[0], problems
    assert "unclassified 1" in line


def test_a_class_over_its_budget_fails_the_gate_listing_its_skips() -> None:
    fourth = entry("tests/quality/test_other.py::test_z", "[opt-in] another")
    problems, _ = skips.verdict(doc(*HELD_OUT, fourth))
    assert len(problems) == 1 and "4 skips of class opt-in, CI accepts 3" in problems[0], problems
    assert all(e["nodeid"] in problems[0] for e in (*HELD_OUT, fourth))
    proc = entry("tests/unit/test_tenants.py::test_a", "[platform] reads Linux's /proc")
    problems, _ = skips.verdict(doc(proc))
    assert len(problems) == 1 and "1 skips of class platform, CI accepts 0" in problems[0], problems


def test_no_record_and_no_test_run_are_errors_never_zero_skips(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    problems, line = skips.verdict(None, "r.json")
    assert problems and "no skip record" in problems[0] and "skips by reason: unknown" in line
    problems, line = skips.verdict(doc(exitstatus=5, tests=0))
    assert problems and "no test ran (pytest's exit 5)" in problems[0], problems
    assert skips.main(["gate", str(tmp_path / "missing.json"), "the step"]) == 1
    assert "no skip record" in capsys.readouterr().out
    (tmp_path / "torn.json").write_text('{"skips": [', encoding="utf-8")
    assert skips.main(["gate", str(tmp_path / "torn.json")]) == 1


def test_the_gate_on_a_file_prints_its_problems_then_the_counts_last(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(doc(*HELD_OUT, *OVER_HTTP)), encoding="utf-8")
    assert skips.main(["gate", str(path), "step"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "ci: step: skips by reason: undecided 0, opt-in 3, platform 0, not-applicable 2, unclassified 0"]
    path.write_text(json.dumps(doc(*HELD_OUT, entry("a::b", "unconditional skip"))), encoding="utf-8")
    assert skips.main(["gate", str(path), "step"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "a skip of no class: a::b" in out[0] and out[-1].startswith("ci: step: skips by reason: ")
    assert skips.main(["counts", str(path), "step"]) == 0  # the counts alone: CI's last lines
    assert capsys.readouterr().out.splitlines() == [
        "ci: step: skips by reason: undecided 0, opt-in 3, platform 0, not-applicable 0, unclassified 1"]


def test_a_session_s_reports_make_the_record_the_gate_reads(tmp_path: Path) -> None:
    def report(nodeid: str, outcome: str, message: str = "", when: str = "call", **keywords: int) -> pytest.TestReport:
        longrepr = (nodeid.split("::")[0], 3, f"Skipped: {message}") if outcome == "skipped" else None
        return pytest.TestReport(nodeid, (nodeid, 3, nodeid), {nodeid.split("::")[1]: 1, **keywords}, outcome,
                                 longrepr, when)

    kept = skips.SessionSkips(str(tmp_path / "record.json"))
    for r in (report("t.py::test_a", "passed"), report("t.py::test_b", "skipped", "[opt-in] asked", "setup"),
              report("t.py::test_c", "skipped", "[opt-in] asked too", "setup", decides=1),
              report("t.py::test_d", "skipped", "no class")):
        kept.pytest_runtest_logreport(r)
    kept.pytest_collectreport(pytest.CollectReport("u.py", "skipped", (  # importorskip, the module skipped whole
        "u.py", 16, "Skipped: [platform] the test extra"), []))
    kept.pytest_collectreport(pytest.CollectReport("v.py", "passed", None, []))
    xfailed = report("t.py::test_e", "skipped", "x")
    xfailed.wasxfail = "known"  # type: ignore[attr-defined]
    kept.pytest_runtest_logreport(xfailed)
    kept.pytest_sessionfinish(0)
    written = json.loads((tmp_path / "record.json").read_text(encoding="utf-8"))
    assert written["tests"] == 5 and [(s["nodeid"], s["class"], s["decides"]) for s in written["skips"]] == [
        ("t.py::test_b", "opt-in", False), ("t.py::test_c", "opt-in", True), ("t.py::test_d", "unclassified", False),
        ("u.py", "platform", False)]
    problems, _ = skips.verdict(written)
    assert len(problems) == 3 and "t.py::test_c" in problems[0] and "t.py::test_d" in problems[1], problems
    assert "class platform, CI accepts 0" in problems[2] and "u.py" in problems[2], problems
    assert kept.summary() == ["skips by reason: undecided 0, opt-in 2, platform 1, not-applicable 0, unclassified 1",
                              "  must decide: t.py::test_c (opt-in, marked decides): [opt-in] asked too",
                              "  of no class: t.py::test_d (unclassified): no class"]


# -- every skip site in the repository says its class ---------------------------------------------------------

# Skips whose message is built elsewhere, each classified above from the code that builds it: a new one fails
# the scan until it is listed here and its messages are classified.
BUILT_ELSEWHERE = {
    ("peakproof/pytest_plugin.py", "cap.sentence(f\"the driver {self.driver_spec or 'of the contract'}\")"),
    ("peakproof/pytest_plugin.py", "message"),  # OffContract's
    ("peakproof/pytest_plugin.py", "result.headline()"),  # a skipped contract stage's
    ("peakproof/pytest_session.py", "report.outcome = 'skipped'"),  # a property turned INCONCLUSIVE
}
SCANNED = ("tests", "properties", "peakproof", "conftest.py")
HELPER = "tests/support/skips.py"  # skip(kind, why) itself


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def text_of(node: ast.AST | None) -> str | None:
    """A message as the code spells it, each value put in as X (None: not spelled there)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)  # type: ignore[misc]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = text_of(node.left), text_of(node.right)
        return None if left is None or right is None else left + right
    return None


def skip_sites(path: str, source: str) -> list[tuple[int, str, str | None]]:
    """Each skip in ``source``: (line, the site as written, its class, or None when its message is built
    elsewhere)."""
    sites: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value == "skipped" \
                and any(isinstance(t, ast.Attribute) and t.attr == "outcome" for t in node.targets):
            sites.append((node.lineno, ast.unparse(node), None))
            continue
        if not isinstance(node, ast.Call):
            continue
        name, kwargs = dotted(node.func), {k.arg: k.value for k in node.keywords}
        if name in ("skip", "skips.skip"):  # the helper: its class, stated
            kind = node.args[0] if node.args else kwargs.get("kind")
            stated = kind.value if isinstance(kind, ast.Constant) else None
            sites.append((node.lineno, ast.unparse(node), stated if stated in CLASSES else skips.UNCLASSIFIED))
            continue
        if name in ("pytest.skip", "pytest.mark.skip"):
            message = node.args[0] if node.args else kwargs.get("reason")
        elif name in ("pytest.mark.skipif", "pytest.importorskip"):
            message = kwargs.get("reason")  # none: pytest's own words ("condition: ...", "could not import")
        else:
            continue
        if message is None:
            sites.append((node.lineno, ast.unparse(node), skips.UNCLASSIFIED))
            continue
        text = text_of(message)
        sites.append((node.lineno, ast.unparse(message), None if text is None else skips.classify(text)))
    return sites


def every_skip_site() -> list[tuple[str, int, str, str | None]]:
    files = [ROOT / "conftest.py"] + [p for top in SCANNED[:-1] for p in sorted((ROOT / top).rglob("*.py"))]
    return [(rel, line, site, kind) for p in files if (rel := p.relative_to(ROOT).as_posix()) != HELPER
            for line, site, kind in skip_sites(rel, p.read_text(encoding="utf-8"))]


def test_every_skip_site_in_the_repository_says_its_class() -> None:
    found = every_skip_site()
    unclassified = [f"{path}:{line}: {site}" for path, line, site, kind in found if kind == skips.UNCLASSIFIED]
    assert unclassified == [], "skips of no class: skip(kind, why), a '[kind] ' reason, or a pattern in skips.py"
    built = {(path, site) for path, _, site, kind in found if kind is None}
    assert built == BUILT_ELSEWHERE, ("skips whose message is built elsewhere: classify their messages in "
                                      "tests/unit/test_skips.py and list them", built ^ BUILT_ELSEWHERE)
    kinds = {kind for *_, kind in found}
    assert {"undecided", "opt-in", "platform", "not-applicable"} <= kinds, kinds  # the scan sees each kind's sites


def test_the_scan_finds_a_skip_of_no_class_in_each_form() -> None:
    source = '''
import pytest
from tests.support.skips import skip
pytestmark = pytest.mark.skipif(True, reason="slow")
@pytest.mark.skipif(True)
def test_a():
    pytest.skip(f"no words for {what}")
    pytest.importorskip("xmlschema")
    skip("typo", "why")
    pytest.skip(reason)
    skip("opt-in", "asked")
    pytest.skip("[platform] " + "root")
'''
    assert sorted((line, kind) for line, _, kind in skip_sites("t.py", source)) == [
        (4, "unclassified"), (5, "unclassified"), (7, "unclassified"), (8, "unclassified"), (9, "unclassified"),
        (10, None), (11, "opt-in"), (12, "platform")]


def test_every_test_that_skips_when_a_neighbour_left_it_undecided_is_marked_decides() -> None:
    unmarked = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path == Path(__file__).resolve():  # this one calls it on outputs made by hand: it runs no load
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_marks = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Assign)
                        and any(dotted(t) == "pytestmark" for t in n.targets)]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and any(
                    isinstance(n, ast.Call) and dotted(n.func).endswith("skip_when_a_neighbour_left_it_undecided")
                    for n in ast.walk(node)):
                marks = [ast.unparse(d) for d in node.decorator_list] + module_marks
                if not any("pytest.mark.decides" in m for m in marks):
                    unmarked.append(f"{path.relative_to(ROOT)}::{node.name}")
    assert unmarked == [], "a test that exists to show a PASS or a FAIL: @pytest.mark.decides"
