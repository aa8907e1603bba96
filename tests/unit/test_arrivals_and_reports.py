"""The arrival engine's arithmetic, SLO thresholds and the HTML report, without a network."""

from __future__ import annotations

import json

import pytest

from peakproof.arrivals import arrival_times, constant, share
from peakproof.checks import CheckResult, Measure
from peakproof.errors import UsageError
from peakproof.history import HandHistory
from peakproof.report import Chart, RunReport, write_report
from peakproof.slo import parse_threshold


def test_the_opening_curve_places_200000_arrivals_50_microseconds_apart() -> None:
    times = arrival_times(constant(20_000, 10))
    assert len(times) == 200_000
    assert times[0] == 0.0 and times[1] == pytest.approx(50e-6) and times[-1] < 10.0


def test_poisson_spacing_is_seeded_and_keeps_the_mean_rate() -> None:
    curve = constant(1000, 10)
    a, b = arrival_times(curve, "poisson", seed=1), arrival_times(curve, "poisson", seed=1)
    assert a == b and a != arrival_times(curve, "poisson", seed=2)
    assert len(a) == pytest.approx(10_000, rel=0.03)


def test_workers_share_the_schedule_so_that_together_they_replay_it_once() -> None:
    times = arrival_times(constant(1000, 3))
    parts = [share(times, 3, i) for i in range(3)]
    assert sorted(t for p in parts for t in p) == times


def test_bad_curves_and_shares_say_what_was_expected() -> None:
    with pytest.raises(UsageError, match="expected rate >= 0 and seconds > 0"):
        constant(10, 0)
    with pytest.raises(UsageError, match="0 <= index < workers"):
        share([0.0], 2, 2)


def test_slo_thresholds_parse_and_judge_from_the_intended_instant() -> None:
    t = parse_threshold("reserve:p99<=100ms")
    assert (t.op, t.stat, t.limit, t.basis) == ("reserve", "p99", 0.1, "intended")
    assert parse_threshold("reserve:mean<=2s@send").basis == "send"
    with pytest.raises(UsageError, match="OP:STAT<=LIMIT"):
        parse_threshold("reserve p99 < 100")
    h = HandHistory()
    for i in range(100):
        op = h.ok("reserve", {"quantity": 1}, {}, pending=True)
        op.intended_time, op.send_time = 0.0, 0.5 if i == 99 else 0.0  # the last one was sent late
        h.at(0.51 if i == 99 else 0.01).finish(op)
        h.at(0.0)
    assert t.judge(h.history.ops).valid is True  # p99 is the 99th of 100: 10 ms
    strict = parse_threshold("reserve:max<=100ms")
    assert strict.judge(h.history.ops).valid is False
    assert parse_threshold("reserve:max<=100ms@send").judge(h.history.ops).valid is True


def test_a_report_leads_with_the_verdict_and_the_index_lists_runs_newest_first(tmp_path) -> None:
    bad = CheckResult("no_oversell", False, {"oversold_units": 12, "violations": 1}, "12 units oversold")
    good = CheckResult("offered_load_matches_curve", True, {"due": 20}, actual=Measure(1.0, "share"),
                       limit=Measure(0.98, "share", ">="))
    r1 = RunReport("tickets-opening", "http://127.0.0.1:1/tickets", 1000.0, 1010.0, {"scale": 0.1}, [bad], [], [good],
                   [Chart("Arrivals", "req/s", {"target": [(0, 10), (1, 10)], "sent": [(0, 9), (1, 10)]})])
    r2 = RunReport("tickets-opening", "x", 2000.0, 2001.0, {}, [], [], [good])
    p1, p2 = write_report(r1, tmp_path), write_report(r2, tmp_path)
    page = p1.read_text()
    assert page.index("FAIL") < page.index("<svg") and "12 units oversold" in page and "<polyline" in page
    assert "100.00%" in page and "&gt;= 98.00%" in page  # the typed measures, rendered once
    assert json.loads(p1.with_suffix(".json").read_text())["pass"] is False
    index = (tmp_path / "index.html").read_text()
    assert index.index(p2.name) < index.index(p1.name)
