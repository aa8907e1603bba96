"""The driver seam's pure parts: error maps, field translation, capabilities and waivers, the
class checks a ``--driver`` gets, and the skeleton ``peakproof driver new`` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from peakproof.capabilities import Capability, apply_waivers, validate_waivers, waiver_lines
from peakproof.cases import all_cases, get_case
from peakproof.checks import CheckResult
from peakproof.driver import construct, driver_class, translate
from peakproof.drivertool import skeleton
from peakproof.errors import DriverSpecError, UsageError
from peakproof.http import ErrorMap
from peakproof.verdict import Outcome, judge_results


def test_an_error_map_reads_a_mapped_code_first_then_the_status_then_the_raw_code() -> None:
    m = ErrorMap(field="problem.type", codes={"sold-out": "sold_out"}, statuses={422: "invalid_request"})
    assert m.code(410, {"problem": {"type": "sold-out"}}) == "sold_out"
    assert m.code(422, {"problem": {"type": "weird"}}) == "invalid_request"
    assert m.code(409, {"problem": {"type": "weird"}}) == "weird"
    assert m.code(409, {"other": 1}) is None  # the caller then says http_409
    assert m.code(409, "not json") is None


def test_translate_renames_maps_and_converts_and_refuses_an_unknown_word() -> None:
    doc = {"hold": {"id": "h1", "state": "ON_HOLD", "count": 2, "expires": "2026-12-01T16:00:00+03:00"}}
    out = translate(doc, {"reservation_id": "id", "status": ("state", {"ON_HOLD": "held"}), "quantity": "count",
                          "expires_at": ("expires", lambda v: v.upper()), "missing": "nope"}, at="hold")
    assert out == {"reservation_id": "h1", "status": "held", "quantity": 2,
                   "expires_at": "2026-12-01T16:00:00+03:00", "missing": None}
    with pytest.raises(ValueError, match="PURCHASED"):
        translate({"state": "PURCHASED"}, {"status": ("state", {"ON_HOLD": "held"})})
    with pytest.raises(TypeError):
        translate({"hold": "not an object"}, {"x": "y"}, at="hold")


CAPS = (Capability("stats", "counters", ("stats",), ("a_check",)),
        Capability("inbox_size", "inboxes", (), ("inbox_capped",)))


def test_a_waived_capability_waives_only_its_undecided_checks_and_the_verdict_lists_it() -> None:
    results = [CheckResult("a_check", "unknown", note="no counters"), CheckResult("inbox_capped", True),
               CheckResult("other", True)]
    out = apply_waivers(results, CAPS, ["stats"])
    assert [r.valid for r in out] == ["waived", True, True]
    verdict = judge_results(out)
    assert verdict.outcome is Outcome.PASS and verdict.reasons and "--without stats" in verdict.reasons[0]
    assert waiver_lines(CAPS, ["stats"], out) == ["waived: stats (counters) with --without stats; not checked: "
                                                  "a_check"]


def test_a_lacking_capability_is_named_and_the_run_stays_inconclusive() -> None:
    results = [CheckResult("a_check", "unknown", note="no counters"), CheckResult("inbox_capped", "unknown"),
               CheckResult("other", True)]
    out = apply_waivers(results, CAPS, [], lacking=["stats"])
    verdict = judge_results(out)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "lacks the 'stats' capability" in out[0].note and "--without stats" in out[0].note
    assert "lack the 'inbox_size' capability" in out[1].note  # a field names itself whenever it is undecided
    assert judge_results(apply_waivers(results, CAPS, ["stats", "inbox_size"])).outcome is Outcome.PASS
    failed = [CheckResult("a_check", False, first_violation="broken")]
    assert judge_results(apply_waivers(failed, CAPS, ["stats"])).outcome is Outcome.FAIL  # a FAIL is never waived


def test_every_check_waived_is_not_a_pass() -> None:
    assert judge_results(apply_waivers([CheckResult("a_check", "unknown")], CAPS, ["stats"])).outcome \
        is Outcome.INCONCLUSIVE


def test_a_waiver_of_a_capability_the_case_does_not_have_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="nosuch"):
        validate_waivers("feed", CAPS, ["nosuch"])
    assert validate_waivers("feed", CAPS, ["stats"]) == ("stats",)


def test_every_case_declares_capabilities_whose_checks_exist() -> None:
    from peakproof.cases.feed.checks import FEED_CHECKS
    from peakproof.cases.notifications.checks import NOTIFICATIONS_CHECKS
    from peakproof.cases.tickets.checks import TICKETS_CHECKS

    known = {c.__name__ for c in (*FEED_CHECKS, *NOTIFICATIONS_CHECKS, *TICKETS_CHECKS)} | {
        "sales_resume_within_the_lease", "decisions_within_100ms_outside_faults",
        "g2_breach_matches_backlog_arithmetic", "shard_down_feeds_correct_and_not_empty"}
    for case in ("tickets", "notifications", "feed"):
        for cap in get_case(case).capabilities:
            assert set(cap.checks) <= known, (case, cap.name, set(cap.checks) - known)


class _Keywords:
    def __init__(self, base_url: str, history: object = None) -> None:
        self.base_url, self.history = base_url, history


def test_a_driver_is_built_with_only_the_keywords_its_constructor_takes() -> None:
    d = construct(_Keywords, "http://x", history="h", transport="t", admin_token="a")
    assert (d.base_url, d.history) == ("http://x", "h")


def test_a_driver_class_lacking_an_operation_or_its_arguments_is_refused_naming_them(tmp_path: Path) -> None:
    f = tmp_path / "drv.py"
    f.write_text("from peakproof.driver import HttpDriver\n"
                 "class NoRead(HttpDriver):\n    pass\n"
                 "class NoIntended(HttpDriver):\n"
                 "    def follow(self, user, followee, *, process=0): pass\n"
                 "    def unfollow(self, user, followee, *, process=0, intended_time=None): pass\n"
                 "    def publish(self, author, text, *, process=0, intended_time=None): pass\n"
                 "    def delete(self, post_id, *, process=0, intended_time=None): pass\n"
                 "    def read(self, user, limit=20, cursor=None, *, process=0, intended_time=None): pass\n")
    protocol = get_case("feed").drivers.protocol
    with pytest.raises(DriverSpecError, match="follow, unfollow, publish, delete, read"):
        driver_class(f"{f}:NoRead", protocol)
    with pytest.raises(DriverSpecError, match=r"follow\(intended_time\)"):
        driver_class(f"{f}:NoIntended", protocol)
    with pytest.raises(DriverSpecError, match="Import failed"):
        driver_class(f"{f}:Absent", protocol)
    with pytest.raises(DriverSpecError, match="module:ClassName"):
        driver_class("no-colon", protocol)


@pytest.mark.parametrize("case", ["tickets", "notifications", "feed"])
def test_the_skeleton_is_python_with_every_operation_the_harness_checks_for(case: str, tmp_path: Path) -> None:
    path = tmp_path / f"skeleton_{case}.py"
    path.write_text(skeleton(get_case(case)), encoding="utf-8")
    cls = driver_class(f"{path}:My{case.title()}", all_cases()[case].drivers.protocol)
    for cap in get_case(case).capabilities:  # every optional capability is there, to keep or delete
        assert all(callable(getattr(cls, m, None)) for m in cap.methods), cap.name


CASES = ["tickets", "notifications", "feed"]


@pytest.mark.parametrize("case", CASES)
def test_the_operation_table_names_every_operation_and_capability_method_of_the_protocol(case: str) -> None:
    from peakproof.driver import operations
    from peakproof.drivertool import _signature, checkup

    drivers, table = get_case(case).drivers, checkup(get_case(case)).OPERATIONS
    required = {o.name for o in table if o.capability is None}
    assert required == set(operations(drivers.protocol)) - {"now", "advance"}
    for cap in get_case(case).capabilities:
        assert set(cap.methods) <= {o.name for o in table if o.capability == cap.name}, cap.name
    for o in table:  # a recorded argument per argument the method takes
        sig = _signature(drivers.protocol if o.capability is None else drivers.over_http, o.name)
        taken = [p for p in sig.parameters.values() if p.name != "self" and p.kind in
                 (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert not o.args or len(taken) == len(o.args), (o.name, [p.name for p in taken], o.args)


@pytest.mark.parametrize("name", CASES)
def test_the_docs_tables_and_the_skeleton_say_what_the_operation_table_says(name: str) -> None:
    from peakproof.drivertool import checkup, generated_region, operations_doc

    case = get_case(name)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "drivers.md").read_text(encoding="utf-8")
    assert generated_region(docs, name) == operations_doc(case), \
        "docs/drivers.md's table is stale: run peakproof driver docs --write docs/drivers.md"
    words = " ".join(skeleton(case).split())
    for o in checkup(case).OPERATIONS:
        assert f"| {o.does} | {o.returns} |" in operations_doc(case), o.name
        if o.name not in getattr(checkup(case), "SKELETON", {}):  # written-out methods have their own text
            assert " ".join(checkup(case).DOCS[o.name].split())[:80] in words, o.name
            assert all(f'"{a}": ' in words for a in o.args), o.name


def test_driver_docs_rewrites_a_stale_table_and_refuses_a_file_without_its_region(tmp_path: Path) -> None:
    from peakproof.drivertool import BEGIN, END, operations_doc, update_docs

    doc = tmp_path / "drivers.md"
    doc.write_text(f"# x\n\n{BEGIN.format(case='feed')} old -->\n| stale |\n{END}\n\ntail\n", encoding="utf-8")
    assert update_docs(doc, [get_case("feed")]) == ["feed"]
    assert operations_doc(get_case("feed")) in doc.read_text(encoding="utf-8") and "stale" not in doc.read_text(encoding="utf-8")
    assert doc.read_text(encoding="utf-8").endswith("\ntail\n")
    assert update_docs(doc, [get_case("feed")]) == []  # current: nothing to rewrite
    with pytest.raises(ValueError, match="no region for tickets"):
        update_docs(doc, [get_case("tickets")])
