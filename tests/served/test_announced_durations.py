"""A URL property that waits on real time says how long before it waits, and no limit the harness set
itself cuts it: pytest-timeout's limit, set below the wait on purpose, is re-armed above what the
property said (``peakproof.pytest_plugin.Pace``). What is asserted is the limit and the outcome, never
how long anything took (``benchmarks/bench_announced_durations.py`` prints those figures)."""

from __future__ import annotations

import os

import re


from peakproof.cases import get_case
from peakproof.launch import ServedTarget
from tests.support.runs import excerpt, properties_against

  # a served reference, a child pytest


def limit_line(out: str, test: str) -> tuple[list[float], float]:
    m = re.search(rf"{test}: said about ([\d.]+) s(?: \(then ([^)]*), from what it measured\))?; took [\d.]+ s; "
                  r"the harness's limit (\d+) s", out)
    assert m, excerpt(out)
    said = [float(m.group(1))] + [float(x.split()[0]) for x in (m.group(2) or "").split(", ") if x]
    return said, float(m.group(3))


def test_the_hold_lapse_property_waits_a_hold_window_longer_than_the_harness_s_limit_and_is_not_cut() -> None:
    # a 3 s hold window (and the 0.25 s clock slack, the 1 s release slack) under a 2 s limit of pytest-timeout
    with ServedTarget(get_case("tickets")) as t:
        code, out, _ = properties_against(t.url, "tickets", "-k", "paid_after_it_lapsed", "--hold-window", "3",
                                       "--timeout", "2")
    # exit 6: alone, it gives the machine's other checks no chance (said, not failed); never cut, never skipped
    assert code == 6 and "1 passed" in out and "harness's own limit" not in out, excerpt(out)
    assert re.search(r"a hold paid after it lapsed: waits for the hold the target granted to lapse \([\d.]+ s from "
                     r"now\), the clock slack \(0.25 s\) and the release lag \(1 s\): about \d+ s", out), excerpt(out)
    said, limit = limit_line(out, "test_a_hold_paid_after_it_lapsed_is_not_sold_and_its_units_come_back")
    assert said[0] >= 3 + 0.25 + 1 and limit >= said[0], (said, limit)


def test_the_feed_machine_says_its_length_and_a_limit_below_it_does_not_cut_it() -> None:
    with ServedTarget(get_case("feed")) as t:
        code, out, _ = properties_against(t.url, "feed", "-k", "served_feed", "--timeout", "1")
    assert code == 0 and "1 passed" in out, excerpt(out)
    said, limit = limit_line(out, "test_a_served_feed_matches_the_pull_model_over_http")
    from peakproof.cases.feed.properties import URL_EXAMPLES
    from peakproof.profiles import PROFILES

    examples = min(PROFILES[os.environ.get("HYPOTHESIS_PROFILE", "dev")].max_examples, URL_EXAMPLES)
    assert f"peakproof: feed over HTTP: {examples} examples x 30 steps" in out, excerpt(out)
    assert len(said) >= 2 and limit >= max(said), (said, limit)  # said again from what its first example measured
