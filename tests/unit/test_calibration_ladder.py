"""The calibration's ladder read as a user with a small staging box needs it: whose limit stopped it,
where it starts and how long each step lasts, what an explicit scale allows, and a curve that does not
fit said before the load."""

from __future__ import annotations

from peakproof.calibrate import CalibrationResult
from peakproof.cases import all_cases
from peakproof.offered import LoadCounters, LoadSettings, judge_offered_load
from peakproof.runner import calibrated_by, does_not_fit, explicit_rate
from peakproof.spec import RunSpec

TICKETS = all_cases()["tickets"]
STEP = {"due": 10, "sent": 10, "on_time": 10, "on_time_share": 1.0, "errors": 0, "broken": 0, "done": 10}


def knee_at(rate: float) -> CalibrationResult:
    """A ladder the target stopped: on time at every step, answered late above ``rate``."""
    steps = [{**STEP, "rate": rate, "p99_from_intended": 0.06},
             {**STEP, "rate": rate * 1.4, "p99_from_intended": 0.4}]
    return CalibrationResult("tickets-calibrate", rate, 400.0, True, steps, stopped_by="target",
                             generator_rate=rate * 1.4)


def test_a_ladder_the_target_stopped_is_its_knee_and_says_so() -> None:
    cal = knee_at(18.5)
    assert cal.knee == 18.5 and "its knee" in cal.sentence()
    assert "(the target missed its limits)" in cal.why_stopped() and "p99 400 ms" in cal.why_stopped()
    generator = CalibrationResult("tickets-calibrate", 9_000.0, 40_000.0, True, [], stopped_by="generator")
    assert generator.knee is None


def test_a_ladder_that_met_a_broken_promise_names_it() -> None:
    steps = [{**STEP, "rate": 10.0, "p99_from_intended": 0.01},
             {**STEP, "rate": 14.0, "p99_from_intended": 0.01, "broken": 3}]
    cal = CalibrationResult("tickets-calibrate", 10.0, 400.0, True, steps, stopped_by="target")
    assert "3 answers broke a promise of the design" in cal.why_stopped()


def test_an_explicit_scale_is_the_ladder_s_top_and_auto_has_none() -> None:
    spec = RunSpec(case="tickets", scale=0.02, processes=2)
    assert explicit_rate(TICKETS, spec) == TICKETS.peak_rate() * 0.02 / 2
    assert explicit_rate(TICKETS, RunSpec(case="tickets", scale="auto")) is None


def test_a_curve_above_a_target_s_knee_is_said_before_the_load_as_the_target_s_to_take() -> None:
    spec = RunSpec(case="tickets", scale=0.02, target_url="http://127.0.0.1:8000/tickets")
    said = does_not_fit(TICKETS, spec, knee_at(18.5), TICKETS.peak_rate() * 0.02) or ""
    assert "does not fit the target" in said and f"{400 / 18.5:.1f}x" in said and "FAIL" in said
    assert does_not_fit(TICKETS, spec, knee_at(18.5), 9.0) is None


def test_a_curve_above_the_generator_s_limit_is_said_before_the_load_with_processes_to_fit_it() -> None:
    spec = RunSpec(case="tickets", scale=1.0)
    cal = CalibrationResult("tickets-calibrate", 16_198.0, 20_000.0, True, [], stopped_by="generator")
    said = does_not_fit(TICKETS, spec, cal, 20_000.0) or ""
    assert "does not fit this machine" in said and "1.2x" in said and "--processes 2" in said
    assert "INCONCLUSIVE" in said


def test_a_target_s_knee_below_the_curve_leaves_a_held_pool_the_target_s_failure() -> None:
    # the knee is no limit of the generator's: a pool held by the target's answers is its FAIL
    held = LoadCounters(due=4_000, sent=1_100, late=1_300, dropped=1_600, pool_full=40, late_by_pool=2_900)
    planned = [i / 400 for i in range(4_000)]
    by = calibrated_by(knee_at(18.5), embedded=False)
    assert by == "target" and calibrated_by(knee_at(18.5), embedded=True) is None  # the reference on the core given it
    judged = judge_offered_load(held, planned, [], LoadSettings(calibrated_rate=18.5, calibrated_by=by))
    assert judged.valid is False and "the target's latency held the pool" in judged.first_violation
    # the same rate as the generator's limit decides nothing
    assert judge_offered_load(held, planned, [], LoadSettings(calibrated_rate=18.5)).valid == "unknown"


def test_the_plan_prints_a_target_s_knee_and_the_factor_to_the_seed_s_peak() -> None:
    from peakproof.plan import render_knee

    spec = RunSpec(case="tickets", target_url="http://127.0.0.1:8111/tickets")
    text = render_knee(TICKETS, knee_at(18.5), spec)
    assert "18.5 arrivals/s: the highest step at which every answer within 100 ms" in text
    assert f"is {TICKETS.peak_rate() / 18.5:,.0f}x its knee" in text and "--scale auto" in text
    faster = CalibrationResult("tickets-calibrate", 9_000.0, 40_000.0, True, [], stopped_by="generator")
    assert "at least 9,000 arrivals/s: the generator gave way first" in render_knee(TICKETS, faster, spec)


def test_an_auto_time_scale_held_back_by_its_cap_says_so_and_which_knob_loads_the_target_more() -> None:
    from peakproof.calibrate import CalibrationResult
    from peakproof.cases import get_case
    from peakproof.runner import fit_load

    feed = get_case("feed")
    spec = RunSpec(case="feed", scale=0.0001, time_scale="auto", target_url="http://127.0.0.1:9/feed")
    knee = CalibrationResult("feed-calibrate", rate=86.0, stopped_by="target", latency_checked=True)
    fitted, text = fit_load(feed, spec, knee)
    assert fitted.time_scale == feed.default_time_scale  # held at the cap...
    assert f"capped at --time-scale {feed.default_time_scale:g}" in text and "raise --scale" in text, text
    roomy = CalibrationResult("feed-calibrate", rate=feed.peak_rate() * 0.01 * 5, stopped_by="target")
    fitted, text = fit_load(feed, RunSpec(case="feed", scale=0.01, time_scale="auto",
                                          target_url="http://127.0.0.1:9/feed"), roomy)
    assert "capped" not in text and fitted.time_scale < feed.default_time_scale, text  # ...and only when it binds


def test_a_failed_properties_stage_prints_its_failures_whole_not_their_tail() -> None:
    from peakproof.runner import failures_of

    history = "\n".join(f"  op {i}: reserve ... ok" for i in range(2_000))
    out = f"collected 3 items\n...F\n==== FAILURES ====\n____ test_x ____\nthe violating run's history:\n{history}\n== 1 failed =="
    shown = failures_of(out)
    assert shown.startswith("==== FAILURES ====") and "op 0:" in shown and "op 1999:" in shown
    assert "collected" not in shown
