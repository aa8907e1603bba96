"""The model ports against the seeds' printed tables, every figure to the printed digit.

``seed_outputs/`` holds the seeds' printed outputs exactly as the seed files print them
(the oracle). Each test pulls every number out of one printout, in order, and compares it
with the same figure computed by the port and formatted the way the seed formats it
(``toFixed`` digits, ``tr-TR`` grouping where the seed uses it). Labels that contain
digits (p50, p99,9, G2, VH3) are not figures and are skipped by the tokenizer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from peakproof.models import feed, notifications, tickets
from peakproof.models.common import js_fixed

OUT = Path(__file__).with_name("seed_outputs")
# a number not glued to a word (p50, G2, VH3 are labels); "x2.78" and "%459.26" are figures
NUMBER = re.compile(r"(?<![A-Za-wyz_\d.,])-?\d+(?:[.,]\d+)*")


def figures(name: str) -> list[str]:
    return NUMBER.findall((OUT / f"{name}.txt").read_text(encoding="utf-8"))


def tr_int(n: int) -> str:  # toLocaleString("tr-TR"): dots between thousands
    return f"{n:,}".replace(",", ".")


def f(x: float, d: int) -> str:
    return js_fixed(x, d)


@pytest.fixture(scope="module")
def t() -> dict:
    return tickets.compute()


@pytest.fixture(scope="module")
def n() -> dict:
    return notifications.compute()


@pytest.fixture(scope="module")
def fd() -> dict:
    return feed.compute()


def test_tickets_back_of_envelope_matches_the_seed_to_the_printed_digit(t: dict) -> None:
    s = t["scale"]
    expected = [f(s["peak_rps"], 0), f(s["opening_demand_items"], 0), f(s["demand_to_quota"], 1),
                f(s["sellout_seconds"], 3), str(s["requests_before_sellout"]), f(s["stock_table_kb"], 1),
                f(s["reservations"], 0)]
    for w in s["windows"]:
        expected += [str(w["window_s"]), f(w["conversion"], 2), f(w["sold_first_round"], 0), f(w["items_back"], 0),
                     f(w["idle_item_seconds"], 0)]
    c = s["window_change"]
    expected += [str(c["from_s"]), str(c["to_s"]), f(c["sold_from"], 0), f(c["sold_to"], 0), f(c["extra_items"], 0),
                 f(c["idle_from"], 0), f(c["idle_to"], 0), f(c["idle_ratio"], 2)]
    assert figures("bilet_olcek") == expected


def test_tickets_contention_model_matches_the_seed_to_the_printed_digit(t: dict) -> None:
    p, d = t["params"], t["derived"]
    expected = [str(p["quota"]), str(p["workers"]), str(p["requests"]), str(p["retry_budget"]), str(p["seed"])]
    for c in t["contention"]:
        expected += [str(c["sold"]), str(c["oversell"]), str(c["stock_left"]), str(c["conflicts"]), str(c["rejected"]),
                     str(c["rejected_valid"]), str(c["wait_steps"]), str(c["total_steps"])]
    expected += [f(d["unprotected_sold_to_quota"], 3), f(d["unprotected_oversell_pct_of_quota"], 2),
                 str(d["optimistic_oversell"]), str(d["optimistic_conflicts"]), str(d["optimistic_valid_rejections"]),
                 str(d["pessimistic_oversell"]), str(d["pessimistic_valid_rejections"]),
                 f(d["pessimistic_to_optimistic_steps"], 2)]
    for b in t["by_workers"]:
        expected += [str(b["workers"]), str(b["optimistic_conflicts"]), str(b["optimistic_valid_rejections"]),
                     str(b["pessimistic_wait_steps"])]
    assert figures("bilet_cekisme") == expected


def test_notifications_back_of_envelope_matches_the_seed_to_the_printed_digit(n: dict) -> None:
    s, p = n["scale"], n["params"]
    expected = [f(s["daily"], 0), f(s["peak_per_s"], 2), f(s["gb_per_day"], 2), str(p["budget"])]
    for c in s["channels"]:
        expected += [f(c["share"], 2), f(c["peak_calls_per_s"], 2), f(c["transient"], 2), f(c["permanent"], 2),
                     f(c["left_after_budget"], 6)]
    expected += [str(p["budget"]), f(s["blended_left"], 6), f(s["single_channel_delivery"], 4),
                 f(p["threshold"], 4), f(s["gap_points"], 2), f(s["undelivered_peak_per_s"], 2),
                 str(s["undelivered_per_day"]), str(p["budget"]), "1", f(p["backoff"], 0), f(s["cascade_worst_s"], 0)]
    assert figures("bildirim_olcek") == expected


def test_notifications_channel_order_model_matches_the_seed_to_the_printed_digit(n: dict) -> None:
    p, d = n["params"], n["derived"]
    expected = [str(p["notifications"]), "3", str(p["budget"]), str(p["seed"])]
    for o in n["orders"]:
        expected += [f(o["delivery_ratio"], 4), str(o["calls"]), f(o["calls_per_notification"], 3),
                     str(o["duplicates"]), f(o["mean_delivery_s"], 2)]
    for m in n["sensitivity"]:
        expected += [f"{m['multiplier']:g}"] + [f(m[o], 4) for o in notifications.ORDERS]
    runs = n["down"]["runs"]
    expected += [f(r["delivery_ratio"], 4) for r in runs] + [str(r["calls"]) for r in runs]
    expected += [f(d["cascade_minus_single_points"], 2), f(d["parallel_calls_ratio"], 2), str(d["parallel_duplicates"]),
                 f(d["parallel_extra_per_notification"], 2), f(d["parallel_mean_delivery_s"], 2),
                 f(d["cascade_mean_delivery_s"], 2)]
    assert figures("bildirim_dagitim") == expected


def test_feed_fan_out_models_match_the_seed_to_the_printed_digit(fd: dict) -> None:
    h, p = fd["fan_out_models"], fd["params"]
    fl = h["followers"]
    expected = [f(h["peak_posts_per_s"], 2), f(h["peak_feed_requests_per_s"], 2), f(h["read_write_ratio"], 2),
                f(h["inbox_store_gb"], 2), str(p["inbox_entries"]),
                f(fl["mean"], 2), str(fl["p50"]), str(fl["p90"]), str(fl["p99"]), str(fl["p99_9"]), str(fl["max"]),
                str(fl["at_cap"]), f(fl["top_0_1pct_edge_share"], 4),
                f(h["fan_out_on_write"]["per_write"], 2), "1.00", f(h["fan_out_on_write"]["work_per_s"], 2),
                "1.00", f(h["fan_in_on_read"]["per_read"], 2), f(h["fan_in_on_read"]["work_per_s"], 2),
                f(h["ratio"], 2), f"{p['feed_requests']:g}", f"{2 * p['feed_requests']:g}",
                f(h["doubling_reads"]["fan_in_from"], 2), f(h["doubling_reads"]["fan_in_to"], 2),
                f(h["doubling_reads"]["fan_out"], 2)]
    assert figures("akis_hesap") == expected


def test_feed_hybrid_threshold_matches_the_seed_to_the_printed_digit(fd: dict) -> None:
    k, p = fd["hybrid"], fd["params"]
    expected = [f(k["steady_fan_out"], 2), f(k["capacity"], 2), f(k["left_for_one_post"], 2), f"{p['window']:g}",
                tr_int(k["threshold"])]
    for r in k["rows"]:
        expected += [tr_int(int(r["threshold"])), str(r["accounts_above"]), f(r["write_work"], 2),
                     f(r["read_work"], 2), f(r["total_work"], 2), f(r["largest_burst_per_s"], 2)]
    c = k["chosen"]
    expected += [str(c["accounts_above"]), f(c["extra_sources_per_read"], 3), f(c["total_work"], 2),
                 f(k["no_threshold"]["largest_post_writes_per_s"], 2), f(k["no_threshold"]["times_steady"], 2)]
    for b in k["slowed_consumer"]:
        expected += [f"{b['consumer_rate']:g}", f(b["backlog_per_s"], 2), f(b["g2_breached_after_s"], 2)]
    expected += [f(k["mean_followers"], 2), f(k["edge_share_above"], 4)]
    assert figures("akis_karma") == expected


def test_the_spec_s_derived_figures_follow_from_the_ports(t: dict, n: dict, fd: dict) -> None:
    # SPEC.md quotes these as arithmetic on the tables; the ports must agree with it
    assert n["derived"]["down_cascade_wasted_calls"] == 166_806 - 112_357
    assert f(fd["hybrid"]["chosen"]["total_vs_no_threshold"], 2) == "5.59"
    assert t["scale"]["requests_before_sellout"] == 3_571
    assert t["params"]["opening_requests"] - t["scale"]["requests_before_sellout"] == 196_429
