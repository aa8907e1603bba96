"""Verdicts mean what they say: three outcomes, unknown above true, errors are findings,
the generator's shortfall is the harness's, the target's is the target's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from peakproof.calibrate import CalibrationResult, auto_scale, processes_for
from peakproof.cases import get_case
from peakproof.checks import CheckResult, Violations
from peakproof.history import HandHistory
from peakproof.offered import (LoadCounters, LoadSettings, judge_offered_load, undecide_latency,
                               undecide_when_behind)
from peakproof.slo import ErrorBudget, parse_threshold, parse_thresholds, with_error_budget
from peakproof.verdict import Outcome, judge_results, merge_outcomes


def held(name: str = "a") -> CheckResult:
    return CheckResult(name, True, chances=3)


def test_one_violation_fails_the_run_whatever_else_is_undecided() -> None:
    v = judge_results([held(), CheckResult("b", "unknown"), CheckResult("c", False, first_violation="oversold")])
    assert v.outcome is Outcome.FAIL and v.exit_code == 1
    assert v.reasons == ["c: oversold"]


def test_an_unknown_check_makes_the_run_inconclusive_never_a_pass() -> None:
    v = judge_results([held(), CheckResult("b", "unknown", note="info ops could explain it")])
    assert v.outcome is Outcome.INCONCLUSIVE and v.exit_code == 2
    assert "info ops could explain it" in v.reasons[0]


def test_a_harness_error_makes_the_run_inconclusive() -> None:
    v = judge_results([held()], harness_errors=["perform raised KeyError"])
    assert v.outcome is Outcome.INCONCLUSIVE and "perform raised KeyError" in v.reasons[0]


def test_only_decided_and_held_checks_pass_and_no_checks_is_not_a_pass() -> None:
    assert judge_results([held("a"), held("b")]).outcome is Outcome.PASS
    assert judge_results([]).outcome is Outcome.INCONCLUSIVE


def test_outcomes_merge_fail_over_inconclusive_over_pass() -> None:
    P, F, I = Outcome.PASS, Outcome.FAIL, Outcome.INCONCLUSIVE
    assert merge_outcomes([P, I, P]) is I
    assert merge_outcomes([I, F, P]) is F
    assert merge_outcomes([P, P]) is P
    assert merge_outcomes([]) is I


def test_a_check_with_no_chance_to_fail_is_not_exercised() -> None:
    r = Violations().result("expired_hold_is_never_sold", {}, chances=0, chance_kind="late confirms")
    assert r.valid == "unknown" and not r.exercised and "not exercised: no late confirms" in (r.note or "")
    assert Violations().result("x", {}, chances=4).valid is True
    v = Violations()
    v.add("sold after expiry")
    assert v.result("x", {}, chances=0).valid is False  # a violation needs no further chance


# -- the offered load: whose shortfall ----------------------------------------------------------


SETTINGS = LoadSettings(calibrated_rate=2_000, peak_rate=20_000)


def test_a_generator_that_fell_behind_is_inconclusive_and_says_how_to_fix_it() -> None:
    c = LoadCounters(due=10_000, sent=10_000, late=3_000, dropped=0, pool_full=0)
    r = judge_offered_load(c, [i / 1000 for i in range(10_000)], [], SETTINGS)
    assert r.valid == "unknown"
    assert "this machine could not offer 1,000 arrivals/s from 1 generator process" in (r.note or "")
    assert "something else took the generator's CPU" in (r.note or "") and "use 10 processes" in (r.note or "")


def test_a_target_whose_latency_filled_the_pool_fails() -> None:
    c = LoadCounters(due=10_000, sent=7_000, late=1_000, dropped=3_000, pool_full=40, late_by_pool=3_900)
    r = judge_offered_load(c, [i / 1000 for i in range(10_000)], [], SETTINGS)
    assert r.valid is False and "pool" in (r.first_violation or "")


def test_arrivals_late_before_the_pool_held_them_are_the_generator_s_shortfall_not_the_target_s() -> None:
    # late before the pool ever held them up: the generator was behind, the target is not to blame
    c = LoadCounters(due=10_000, sent=7_000, late=1_000, dropped=3_000, pool_full=40, late_by_pool=3_900,
                     late_by_pool_busy=3_500, cpu_percent=40)
    r = judge_offered_load(c, [i / 1000 for i in range(10_000)], [], SETTINGS)
    assert r.valid == "unknown" and "3,500 of them were late already when they fell due" in (r.note or "")
    # each fell due while the dispatcher waited, but the generator used all the CPU it could get
    r = judge_offered_load(replace(c, late_by_pool_busy=0, cpu_percent=97), [i / 1000 for i in range(10_000)], [],
                           SETTINGS)
    assert r.valid == "unknown" and "used 97% of the CPU it could get" in (r.note or "")
    # the same shortfall, each late arrival falling due while the dispatcher waited for a slot: the target's
    r = judge_offered_load(replace(c, late_by_pool_busy=100, cpu_percent=30), [i / 1000 for i in range(10_000)], [], SETTINGS)
    assert r.valid is False


def test_a_curve_above_what_the_machine_offered_in_calibration_is_inconclusive_whatever_filled_the_pool() -> None:
    c = LoadCounters(due=10_000, sent=2_000, late=1_000, dropped=8_000, pool_full=40, late_by_pool=8_900)
    r = judge_offered_load(c, [i / 20_000 for i in range(10_000)], [], SETTINGS)  # 20,000/s vs 2,000/s offered
    assert r.valid == "unknown" and "above what this machine offered in calibration (2,000/s)" in (r.note or "")


def test_a_run_stopped_before_its_curve_ended_is_inconclusive_however_punctual_its_few_arrivals() -> None:
    c = LoadCounters(due=3, sent=3, late=0)
    r = judge_offered_load(c, [i / 200 for i in range(600)], [0.0, 0.005, 0.01], SETTINGS)
    assert r.valid == "unknown" and "3 of 600 planned arrivals fell due" in (r.note or "")


def test_a_curve_offered_on_time_holds() -> None:
    c = LoadCounters(due=1_000, sent=1_000, late=10)
    r = judge_offered_load(c, [i / 100 for i in range(1_000)], [i / 100 for i in range(1_000)], SETTINGS)
    assert r.valid is True and r.actual.value == 0.99 and r.counts["peak_sent_per_s"] == 100


def test_an_slo_missed_while_the_generator_was_late_is_not_decided() -> None:
    slo = CheckResult("reserve p99 latency (intended)", False, first_violation="Actual 2,600 ms / Limit 100 ms")
    behind = CheckResult("offered_load_matches_curve", "unknown")
    kept_up = CheckResult("offered_load_matches_curve", True)
    assert undecide_when_behind([slo], behind)[0].valid == "unknown"
    assert undecide_when_behind([slo], kept_up)[0].valid is False


def test_a_latency_missed_while_a_neighbour_took_cpu_and_the_generator_fell_behind_names_the_neighbour() -> None:
    slo = CheckResult("reserve p99 latency (intended)", False, first_violation="Actual 3.01 s / Limit 100 ms")
    behind = CheckResult("offered_load_matches_curve", "unknown")
    neighbour = "a neighbour took CPU the run needed (0.9 of a core in its worst 5 s)"
    named = undecide_latency([slo], behind, neighbour, [slo.name])[0]
    assert named.valid == "unknown" and neighbour in (named.note or ""), named.note
    assert "fell behind" in (undecide_latency([slo], behind, None, [slo.name])[0].note or "")
    assert undecide_latency([slo], CheckResult("offered_load_matches_curve", True), None, [slo.name])[0].valid is False


# -- errors are findings ---------------------------------------------------------------------


def test_a_target_answering_500_to_every_reservation_blows_the_error_budget() -> None:
    h = HandHistory()
    for i in range(50):
        h.info("reserve", {"quota_id": "q", "request_id": f"r{i}"}, "database_unavailable")
    h.ok("read_quota", {"quota_id": "q"}, {})
    r = parse_threshold("errors:rate<=0.1%").judge(h.history.ops)
    assert r.valid is False and r.counts["worst_kind"] == "reserve" and r.actual.value == 1.0
    assert "database_unavailable x50" in (r.first_violation or "")


def test_refusals_the_contract_allows_are_counted_but_are_not_errors() -> None:
    h = HandHistory()
    for i in range(1_000):
        h.fail("reserve", {"request_id": f"r{i}"}, "sold_out")
    h.info("reserve", {"request_id": "x"}, "timeout")  # 1 in 1,001: within 0.1%
    r = ErrorBudget(0.001).judge(h.history.ops)
    assert r.valid is True and r.counts["allowed_refusals"] == {"reserve sold_out": 1_000}
    assert r.counts["errors"] == 1
    h.fail("reserve", {"request_id": "y"}, "connection_refused")  # a refused connection is an error
    assert ErrorBudget(0.001).judge(h.history.ops).valid is False


def test_timeouts_a_neighbour_may_have_caused_leave_the_error_budget_undecided_but_wrong_answers_do_not() -> None:
    h = HandHistory()
    for i in range(60):
        h.ok("confirm", {"reservation_id": f"r{i}"}, {})
    for i in range(18):
        h.info("confirm", {"reservation_id": f"t{i}"}, "timeout")
    neighbour = "processes outside the run took 1.79 of a core"
    quiet = ErrorBudget(0.001).judge(h.history.ops)
    assert quiet.valid is False and "timeout x18" in quiet.first_violation  # nobody took CPU: the target's
    busy = ErrorBudget(0.001).judge(h.history.ops, contended=neighbour)
    assert busy.valid == "unknown" and neighbour in busy.note and "18 of the errors were timeouts" in busy.note
    assert busy.counts["timeouts_while_contended"] == 18
    h.info("confirm", {"reservation_id": "e"}, "http_500")  # 1 in 79 answered wrongly: over 0.1% on its own
    assert ErrorBudget(0.001).judge(h.history.ops, contended=neighbour).valid is False


def test_every_scenario_gets_the_error_budget_unless_the_user_sets_one() -> None:
    assert [str(t) for t in parse_thresholds(with_error_budget(["reserve:p99<=100ms"]))] == [
        "reserve:p99<=100ms@intended", "errors:rate<=0.1%"]
    assert with_error_budget(["errors:rate<=5%"]) == ["errors:rate<=5%"]


# -- fitting the load to the machine -------------------------------------------------------------


def test_auto_scale_runs_at_the_case_s_headroom_of_the_calibrated_rate() -> None:
    tickets = get_case("tickets")
    peak = tickets.peak_rate()  # the ported model's 200,000 requests / 10 s
    assert peak == 200_000 / 10
    cal = CalibrationResult("tickets-calibrate", 2_151.3)
    assert tickets.headroom == 0.4  # the mix's knee is about half the calibrated rate: a fifth below it
    assert auto_scale(tickets, cal, peak) == 0.043  # 0.4 x 2,151.3 / 20,000 = 0.0430..., two digits down
    assert auto_scale(tickets, cal, peak, processes=2) == 0.086  # 0.0860...
    assert auto_scale(tickets, CalibrationResult("x", 0.0, error="refused"), peak) == 0.0
    assert processes_for(peak, 2_151.3) == 10


def test_the_charted_p99_is_the_judged_p99_in_a_written_report(tmp_path) -> None:
    import json

    from peakproof.offered import load_charts
    from peakproof.report import RunReport, write_report
    from peakproof.slo import Threshold

    h = HandHistory()
    for i in range(137):  # two intended seconds, latencies 1..137 ms
        t = 0.0 if i < 100 else 1.0
        op = h.at(t).ok("reserve", {"request_id": f"r{i}"}, {}, pending=True)
        op.intended_time, op.send_time = t, t
        h.at(t + (i + 1) / 1000).finish(op)
    slo = Threshold("reserve", "p99", 1.0)
    judged = slo.judge(h.history.ops)
    charts = load_charts([0.0] * 100 + [1.0] * 37, h.history.ops, 0.0, {}, [slo])
    path = write_report(RunReport("tickets-opening", "x", 0.0, 2.0, {}, [], [judged], [], charts), tmp_path)
    doc = json.loads(path.with_suffix(".json").read_text())
    chart = next(c for c in doc["charts"] if c["title"].startswith("Service levels"))
    charted = chart["series"]["reserve p99 whole run (judged)"][0][1]
    assert charted == doc["slos"][0]["actual"]["value"]  # the same number, not a near one
    assert charted == pytest.approx(0.136)  # nearest rank: the 136th of 137
    by_second = dict(chart["series"]["reserve p99 by second"])  # by the same rule per second
    assert by_second[0] == pytest.approx(0.099) and by_second[1] == pytest.approx(0.137)
    assert doc["slos"][0]["actual"]["unit"] == "s" and doc["slos"][0]["limit"]["cmp"] == "<="


def test_a_loopback_target_shares_the_machine_and_a_remote_one_does_not() -> None:
    from peakproof.runner import on_loopback

    assert on_loopback("http://127.0.0.1:8000/tickets") and on_loopback("http://127.3.4.5/x")
    assert on_loopback("http://localhost:8000/feed") and on_loopback("http://[::1]:8000/feed")
    assert not on_loopback("https://staging.example/tickets") and not on_loopback("http://10.0.0.5/tickets")


def test_g2_does_not_count_a_post_whose_delete_was_in_flight_as_missing() -> None:
    from peakproof.cases.feed.checks import FeedAnalysis, posts_visible_within_window

    h = HandHistory()
    h.at(0).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    h.at(1).ok("publish", {"author_id": "b", "text": "x"}, {"post_id": "p1", "author_id": "b", "created_at": 1.0})
    gone = h.at(100).ok("delete", {"post_id": "p1"}, {}, pending=True)  # sent, not yet answered
    h.at(100).ok("read", {"user_id": "a", "limit": 20, "cursor": None}, {"items": [], "next_cursor": None})
    h.finish(gone)
    assert posts_visible_within_window(FeedAnalysis(h.history, window=60)).valid is not False
    h2 = HandHistory()  # the same without the delete: a post 99 s old missing is a G2 violation
    h2.at(0).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    h2.at(1).ok("publish", {"author_id": "b", "text": "x"}, {"post_id": "p1", "author_id": "b", "created_at": 1.0})
    h2.at(100).ok("read", {"user_id": "a", "limit": 20, "cursor": None}, {"items": [], "next_cursor": None})
    assert posts_visible_within_window(FeedAnalysis(h2.history, window=60)).valid is False
