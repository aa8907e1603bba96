"""``peakproof plan`` (its arithmetic, and a real run) and peakproof in Locust's web UI."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from peakproof.calibrate import CalibrationResult
from peakproof.cases import get_case
from peakproof.launch import free_port
from peakproof.plan import make_plan, render

ROOT = Path(__file__).resolve().parents[2]


def calibration(rate: float, p99: float = 0.004) -> CalibrationResult:
    return CalibrationResult("tickets-calibrate", rate, 20_000, False,
                             [{"rate": 400.0, "p99_from_intended": p99}, {"rate": 560.0, "p99_from_intended": p99}],
                             seconds=6.0)


def test_the_plan_divides_the_seed_s_peak_by_what_one_process_offers_with_the_case_s_headroom() -> None:
    plan = make_plan(get_case("tickets"), calibration(8_000), target_local=False)
    plan.cores = 2
    # 20,000/s at 0.4 x 8,000 = 3,200/s a process: 7 processes, 2 per machine (the target is elsewhere): 4 machines
    assert (plan.processes, plan.processes_per_machine, plan.machines) == (7, 2, 4)
    text = render(plan, "http://staging:8000/tickets", calibration(8_000))
    assert "--expect-workers 7" in text and "--master-host MASTER --processes 2" in text
    assert "on each of the 4 worker machines" in text


def test_a_peak_one_machine_can_offer_is_planned_as_one_run_with_its_processes() -> None:
    plan = make_plan(get_case("notifications"), calibration(6_000), target_local=True)
    plan.cores = 2
    # 1,736.11/s at 0.4 x 6,000 = 2,400/s: one process, on one core beside the target
    assert (plan.processes, plan.machines) == (1, 1)
    text = render(plan, None, calibration(6_000))
    assert "peakproof run notifications --target-url URL --scale 1 --processes 1" in text
    assert "can replay the full peak by itself" in text


def test_the_feed_s_full_peak_is_planned_at_time_scale_one() -> None:
    plan = make_plan(get_case("feed"), calibration(3_000), target_local=True)
    assert "peakproof run feed --target-url URL --scale 1 --time-scale 1 --processes 1" in \
        render(plan, None, calibration(3_000))


def test_a_slow_target_needs_a_larger_pool_and_the_plan_says_how_large() -> None:
    plan = make_plan(get_case("tickets"), calibration(8_000, p99=0.9), target_local=False, pool_size=1000)
    plan.cores = 2
    # 20,000/s over 7 processes = 2,857/s each, answered in 0.9 s: 2,571 in flight per process; 1.5 x that
    assert plan.processes == 7 and plan.in_flight_per_process == pytest.approx(20_000 / 7 * 0.9)
    assert "raise --pool-size to 3,858" in render(plan, "http://x", calibration(8_000, p99=0.9))


def test_no_rate_measured_is_no_plan_and_says_why() -> None:
    cal = CalibrationResult("tickets-calibrate", 0.0, error="Locust exited 1: boom")
    plan = make_plan(get_case("tickets"), cal, target_local=True)
    assert plan.processes == 0 and "no plan: calibration failed: Locust exited 1: boom" in render(plan, None, cal)
@pytest.mark.alone  # a load whose verdict the page shows: no other test beside it (tests/conftest.py)
def test_the_web_ui_runs_the_scenario_chosen_in_its_form_and_shows_the_verdict(serve_tickets) -> None:
    served = serve_tickets()
    port = free_port()
    locust = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--host", served.url,
                               "--web-host", "127.0.0.1", "--web-port", str(port), "--loglevel", "WARNING"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    web = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                page = requests.get(web + "/", timeout=1).text
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        # the form: the scenario is a drop-down of the registered ones; the user counts are the shape's
        assert '"hide_common_options": true' in page and '"tickets-sold-out"' in page
        # a name that is no scenario: not started, and the tab says why
        requests.post(f"{web}/swarm", data={"scenario": "tickets-typo"}, timeout=10)
        verdict = _wait_verdict(web)
        assert verdict["outcome"] == "NOT STARTED" and "choose one of" in verdict["reasons"][0]
        requests.post(f"{web}/swarm", data={"scenario": "tickets-sold-out", "scale": "0.01", "duration": "3"},
                      timeout=10)
        verdict = _wait_verdict(web, not_outcome="NOT STARTED")
        rows = {r["what"]: r["value"] for r in verdict["rows"]}
        assert verdict["outcome"] == "PASS" and rows["scenario"] == "tickets-sold-out" and rows["state"] == "judged"
        # the whole curve of the form's options (200/s for 3 s), not a run cut short by the failed start before it
        assert any("chances 600 due arrivals" in r["value"] for r in verdict["rows"]), verdict["rows"]
        report = requests.get(f"{web}/peakproof/report", timeout=10)
        assert report.status_code == 200 and "tickets-sold-out" in report.text
        stats = requests.get(f"{web}/stats/requests", timeout=10).json()
        assert stats["extended_stats"][0]["key"] == "peakproof"
    finally:
        locust.terminate()
        try:
            locust.wait(15)
        except subprocess.TimeoutExpired:
            locust.kill()


def _wait_verdict(web: str, not_outcome: str = "", seconds: float = 90) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        doc = requests.get(f"{web}/peakproof/verdict", timeout=5).json()
        if doc.get("outcome") and doc["outcome"] != not_outcome:
            return doc
        time.sleep(0.3)
    raise AssertionError(f"no verdict within {seconds} s: {doc}")
