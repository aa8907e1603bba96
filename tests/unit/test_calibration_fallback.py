"""A ladder that never falls back above a step that failed (issue 46): the warm-up before a ladder's first
step goes unjudged, a calibration that kept no step says so, and ``--scale auto`` never runs above the
highest step kept, nor, when none was, above the lowest step tried; never at a fixed share of the seed's peak."""

from __future__ import annotations

import pytest

from peakproof.calibrate import STEP_DOWN, CalibrationResult, auto_scale
from peakproof.cases import all_cases
from peakproof.runner import fit_load, fitted_rate
from peakproof.spec import RunSpec

TICKETS = all_cases()["tickets"]
URL = "http://127.0.0.1:9/tickets"


def step(rate: float, p99: float | None, kept: bool, sent: int = 12) -> dict:
    return {"rate": rate, "due": 12, "sent": sent, "on_time": sent, "on_time_share": sent / 12, "errors": 0,
            "broken": 0, "done": sent, "p99_from_intended": p99, "kept": kept}


def slow_everywhere() -> CalibrationResult:
    """The first ladder's first step missed, so did the ladder stepped down to 1/s."""
    steps = [step(2.1, 0.122, False), step(2.9, None, False, 0), step(STEP_DOWN, 0.121, False),
             step(1.4, None, False, 0)]
    return CalibrationResult("tickets-calibrate", 0.0, 40_000.0, True, steps, stopped_by="target", warmup=4.0,
                             stepped_down_from=2.1)


def cold_start() -> CalibrationResult:
    """The first step missed (the shop was cold); warmed, the ladder from 1/s kept up to 27/s."""
    steps = [step(2.1, 0.122, False), step(STEP_DOWN, 0.006, True), step(1.4, 0.006, True), step(27.0, 0.01, True),
             step(37.8, 0.3, False)]
    return CalibrationResult("tickets-calibrate", 27.0, 40_000.0, True, steps, stopped_by="target", warmup=4.0,
                             stepped_down_from=2.1)


def test_a_calibration_that_kept_no_step_says_so_and_the_load_runs_at_the_lowest_step_it_tried() -> None:
    cal = slow_everywhere()
    assert cal.highest_kept is None and cal.lowest_tried == STEP_DOWN and not cal.ok
    fitted, text = fit_load(TICKETS, RunSpec(case="tickets", scale="auto", target_url=URL), cal)
    assert 0 < fitted_rate(TICKETS, fitted) <= cal.lowest_tried, text
    assert "the calibration could not conclude" in text and "(1/s) after a 4 s warm-up" in text, text
    assert "p99 121 ms" in text and "the lowest rate the calibration tried" in text, text
    assert f"--scale {TICKETS.default_scale:g}" not in text  # never the fixed share of the seed's peak


def test_a_calibration_that_failed_before_any_step_runs_at_the_ladder_s_lowest_step() -> None:
    cal = CalibrationResult("tickets-calibrate", 0.0, error="Locust exited 1: boom")
    fitted, text = fit_load(TICKETS, RunSpec(case="tickets", scale="auto", target_url=URL), cal)
    assert fitted_rate(TICKETS, fitted) <= STEP_DOWN and "the ladder's lowest step" in text, text


def test_a_cold_start_is_sized_from_the_warmed_ladder_never_above_its_highest_kept_step() -> None:
    cal = cold_start()
    assert cal.highest_kept == 27.0 and cal.lowest_tried == STEP_DOWN
    for processes in (1, 2, 8):  # more generators do not make the target faster
        fitted, text = fit_load(TICKETS, RunSpec(case="tickets", scale="auto", target_url=URL, processes=processes),
                                cal)
        assert fitted_rate(TICKETS, fitted) <= cal.highest_kept, (processes, text)
    assert "stopped at 38/s" in cal.why_stopped(), cal.why_stopped()  # the first ladder's 2.1/s is no knee
    assert "first step (2.1/s) missed, so the ladder stepped down to 1/s" in cal.sentence(), cal.sentence()


def test_a_generator_s_limit_still_sizes_the_load_per_process() -> None:
    cal = CalibrationResult("tickets-calibrate", 2_151.3)  # no steps: the figure as an earlier run stated it
    assert auto_scale(TICKETS, cal, TICKETS.peak_rate(), processes=2) == 0.086


@pytest.mark.parametrize("first", [1.0, 2.1, 16.0, 400.0])
def test_the_ladder_warms_the_target_at_its_first_rate_and_judges_none_of_the_warm_up(first: float) -> None:
    from peakproof.cases import run_of
    from peakproof.load.scenario import Calibration

    spec = RunSpec(case="tickets", scale="auto", calibrate_min_rate=first, calibrate_max_rate=first * 10)
    ladder = Calibration(run_of(spec))
    warm = [a for a in ladder.arrivals() if a.data[0] == -1]
    assert ladder.warmup >= Calibration.WARMUP_SECONDS
    assert len(warm) >= Calibration.WARMUP_PROBES - 1 and all(a.t < ladder.starts[0] for a in warm)
    assert all(ladder.step_of(a.t) == -1 for a in warm)
    firsts = [a for a in ladder.arrivals() if a.data[0] == 0]
    assert firsts and all(ladder.step_of(a.t) == 0 for a in firsts)
    assert len({a.data[1] for a in ladder.arrivals()}) == len(ladder.arrivals())  # every probe its own request
