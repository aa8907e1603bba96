"""The feed's peak workload and its Locust scenario, end to end on 127.0.0.1 (small and short)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.locust_run import run_locust
from peakproof.cases import get_case
from peakproof.cases.feed import FeedWorkload
from peakproof.launch import ServedTarget
from peakproof.models.feed import FeedParams, followers

from tests.support.broken_feeds import DropsAboveThreshold, serve_core

ROOT = Path(__file__).resolve().parents[2]


def test_the_graph_gives_every_account_the_seeds_follower_count_and_no_self_follows() -> None:
    w = FeedWorkload(0.002, 100, prefix="t-")
    pairs, above = w.graph()
    counts: dict[str, int] = {}
    newcomers = {w.user(i) for i in range(w.users, w.population)}
    for user, account in pairs:
        assert user != account
        if user not in newcomers:
            counts[account] = counts.get(account, 0) + 1
    drawn, _ = followers(FeedParams(users=w.users))
    assert [counts.get(w.user(i), 0) for i in range(w.users)] == [int(x) for x in drawn]
    assert len(set(pairs)) == len(pairs)
    assert sum(above) == sum(int(x) for x in drawn if x > w.threshold)
    # newcomers follow only accounts well below the threshold: the "without" group of the latency chart
    assert all(n == 0 for n in above[w.users:]) and len(above) == w.population
    assert sum(1 for u, _ in pairs if u in newcomers) == w.newcomers * w.NEWCOMER_FOLLOWS


def test_compressing_time_keeps_the_seeds_threshold_and_divides_breach_times() -> None:
    slow, fast = FeedWorkload(0.002, 1), FeedWorkload(0.002, 50)
    # the seed's rule, window x spare capacity, keeps its value when time is compressed
    assert slow.threshold == fast.threshold == int(slow.window * (slow.capacity - slow.steady) + 0.5)
    assert fast.read_rate == pytest.approx(slow.read_rate * 50) and fast.window == pytest.approx(slow.window / 50)
    share = slow.seed_slowed[1]["share_of_write_work"]
    assert fast.slowed(share)["g2_breached_after_s"] == pytest.approx(slow.slowed(share)["g2_breached_after_s"] / 50)
    # at full scale the seed's own row (1,000 writes/s): the port's arithmetic, not a copied figure
    assert slow.seed_slowed[1]["g2_breached_after_s"] == pytest.approx(
        60 * 1000 / (1000 / share - 1000))


def _locust(url: str, tmp_path: Path, scenario: str = "feed-peak", *extra: str) -> tuple[int, dict[str, Any], str]:
    return run_locust(url, scenario, tmp_path, "--scale", "0.002", "--time-scale", "100", "--duration", "6", *extra,
                      timeout=300)


def _result(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for group in ("load", "checks", "slos") for r in doc[group] if r["name"] == name)
def test_the_peak_scenario_passes_on_the_reference_target_with_every_check_judged(tmp_path: Path) -> None:
    with ServedTarget(get_case("feed")) as t:
        code, doc, out = _locust(t.url, tmp_path)
    assert code == 0, out[-3000:]
    for name in ("feed_is_newest_first", "deleted_posts_never_shown", "unfollowed_authors_never_shown",
                 "no_duplicate_items", "pages_do_not_skip_or_repeat", "feed_matches_pull_model", "inbox_capped",
                 "posts_visible_within_window", "first_page p99 latency (intended)", "offered_load_matches_curve"):
        assert _result(doc, name)["valid"] is True, (name, _result(doc, name))
    assert _result(doc, "feed_matches_pull_model")["counts"]["quiet_reads"] > 100
    assert doc["details"]["visibility"]["watched posts"] > 0
    assert (tmp_path / doc["html"]).read_text().count("<svg") >= 6


def test_the_peak_scenario_catches_a_served_hybrid_that_drops_above_threshold_authors(tmp_path: Path) -> None:
    url, server = serve_core(DropsAboveThreshold(time.time))
    try:
        code, doc, out = _locust(url, tmp_path)
    finally:
        server.should_exit = True
    assert code == 1, out[-3000:]
    r = _result(doc, "feed_matches_pull_model")
    assert r["valid"] is False and "differs from the pull model" in r["first_violation"], r
def test_a_refused_target_is_a_finding_in_the_report_not_a_crash(tmp_path: Path) -> None:
    from peakproof.launch import free_port

    code, doc, out = _locust(f"http://127.0.0.1:{free_port()}/feed", tmp_path)
    assert code == 1, out[-3000:]
    r = _result(doc, "target_setup_succeeded")
    assert r["valid"] is False and "refused" in r["first_violation"].lower(), r
    # the run stopped at its setup: no curve was replayed against the refused address (what made it quick)
    load = _result(doc, "offered_load_matches_curve")
    assert load["valid"] == "unknown" and load["chances"] == 0 and "setup failed" in load["note"], load
    assert "Traceback" not in out
