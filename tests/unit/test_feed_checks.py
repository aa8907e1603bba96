"""FeedAnalysis and the feed checks on hand-written histories: each rule, both ways."""

from __future__ import annotations

from typing import Any

from peakproof.cases.feed.checks import (FeedAnalysis, deleted_posts_never_shown, feed_is_newest_first,
                                         feed_matches_pull_model, inbox_capped, no_duplicate_items,
                                         pages_do_not_skip_or_repeat, unfollowed_authors_never_shown)
from peakproof.cases.feed.faults import g2_breach_matches_backlog_arithmetic, shard_down_feeds_correct_and_not_empty
from peakproof.cases.feed.lag import lag_charts, percentile, visibility_lags
from peakproof.history import HandHistory


def post(pid: str, author: str, t: float) -> dict[str, Any]:
    return {"post_id": pid, "author_id": author, "text": pid, "created_at": t}


def page(items: list[dict[str, Any]], nxt: Any = None, backlog: int = 0, **extra: Any) -> dict[str, Any]:
    return {"items": items, "next_cursor": nxt, "backlog": backlog, **extra}


def read_args(user: str = "a", limit: int = 20, cursor: Any = None) -> dict[str, Any]:
    return {"user_id": user, "limit": limit, "cursor": cursor}


def three_posts() -> tuple[HandHistory, list[dict[str, Any]]]:
    h = HandHistory()
    h.at(0).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    posts = [post(f"p{i}", "b", float(i)) for i in (1, 2, 3)]
    for p in posts:
        h.at(p["created_at"]).ok("publish", {"author_id": "b", "text": p["text"]}, p)
    return h, posts


def test_a_read_is_quiet_only_when_no_write_overlapped_it() -> None:
    h, posts = three_posts()
    quiet = h.at(5).ok("read", read_args(), page(posts[::-1]))
    slow = h.at(6).ok("publish", {"author_id": "b", "text": "x"}, post("p4", "b", 6.0), pending=True)
    noisy = h.at(6).ok("read", read_args(), page(posts[::-1]))
    h.finish(slow)
    a = FeedAnalysis(h.history)
    assert a.quiet(quiet) and not a.quiet(noisy)


def test_the_pull_model_is_every_live_followed_post_newest_first_and_a_settled_read_must_match_it() -> None:
    h, posts = three_posts()
    h.at(4).ok("delete", {"post_id": "p2"}, {})
    good = h.at(5).ok("read", read_args(), page([posts[2], posts[0]]))
    assert feed_matches_pull_model(FeedAnalysis(h.history)).valid is True
    model, guaranteed = FeedAnalysis(h.history).model(good)
    assert [k[1] for k in model] == ["p3", "p1"] and guaranteed == 2
    h.at(6).ok("read", read_args(), page([posts[2]]))  # settled but stops early, within the cap: p1 is missing
    r = feed_matches_pull_model(FeedAnalysis(h.history))
    assert r.valid is False and "stops after 1 posts" in r.first_violation


def test_beyond_the_inbox_cap_a_settled_page_may_leave_posts_out_but_not_reorder_them() -> None:
    h, posts = three_posts()
    h.at(5).ok("read", read_args(), page([posts[2], posts[1]]))  # cap 2: p1 is beyond it
    assert feed_matches_pull_model(FeedAnalysis(h.history, inbox_cap=2)).valid is True
    h.at(6).ok("read", read_args(), page([posts[2], posts[0], posts[1]]))  # out of order past the cap
    assert feed_matches_pull_model(FeedAnalysis(h.history, inbox_cap=2)).valid is False


def test_order_duplicates_deletes_and_unfollows_are_judged_on_what_was_shown() -> None:
    h, posts = three_posts()
    h.at(5).ok("read", read_args(), page([posts[0], posts[2]]))
    assert feed_is_newest_first(FeedAnalysis(h.history)).valid is False
    h2, posts = three_posts()
    h2.at(5).ok("read", read_args(), page([posts[2], posts[2]]))
    assert no_duplicate_items(FeedAnalysis(h2.history)).valid is False
    h3, posts = three_posts()
    h3.at(4).ok("delete", {"post_id": "p3"}, {})
    h3.at(5).ok("read", read_args(), page([posts[2]]))
    r = deleted_posts_never_shown(FeedAnalysis(h3.history))
    assert r.valid is False and r.chances == 1
    h4, posts = three_posts()
    h4.at(4).ok("unfollow", {"user_id": "a", "followee_id": "b"}, {})
    h4.at(5).ok("read", read_args(), page([posts[2]]))
    assert unfollowed_authors_never_shown(FeedAnalysis(h4.history)).valid is False


def test_a_delete_still_in_flight_excuses_the_post_it_deletes() -> None:
    h, posts = three_posts()
    gone = h.at(4).ok("delete", {"post_id": "p3"}, {}, pending=True)
    h.at(5).ok("read", read_args(), page(posts[::-1]))
    h.finish(gone)
    assert deleted_posts_never_shown(FeedAnalysis(h.history)).valid is not False


def test_an_opaque_cursor_means_after_the_last_item_of_the_page_that_returned_it() -> None:
    h, posts = three_posts()
    first = h.at(5).ok("read", read_args(limit=1), page([posts[2]], nxt="opaque-1"))
    turn = h.at(6).ok("read", read_args(limit=1, cursor="opaque-1"), page([posts[1]], nxt="opaque-2"))
    a = FeedAnalysis(h.history)
    assert a.bound(first) == (float("inf"), "") and a.bound(turn) == (3.0, "p3")
    assert pages_do_not_skip_or_repeat(a).valid is True and pages_do_not_skip_or_repeat(a).chances == 1
    h.at(7).ok("read", read_args(limit=1, cursor="opaque-2"), page([posts[1]]))  # p2 again: a repeat
    assert pages_do_not_skip_or_repeat(FeedAnalysis(h.history)).valid is False


def test_a_page_turn_that_skips_a_settled_post_is_a_skip() -> None:
    h, posts = three_posts()
    h.at(5).ok("read", read_args(limit=1), page([posts[2]], nxt=[3.0, "p3"]))
    h.at(6).ok("read", read_args(limit=1, cursor=[3.0, "p3"]), page([posts[0]]))  # leaves p2 out
    r = pages_do_not_skip_or_repeat(FeedAnalysis(h.history))
    assert r.valid is False and "skips post p2" in r.first_violation


def test_the_inbox_cap_is_judged_on_what_the_target_reports_and_unknown_without_it() -> None:
    h, posts = three_posts()
    h.at(5).ok("read", read_args(), page(posts[::-1], inbox_size=3))
    assert inbox_capped(FeedAnalysis(h.history, inbox_cap=2)).valid is False
    h2, posts = three_posts()
    h2.at(5).ok("read", read_args(), page(posts[::-1]))
    assert inbox_capped(FeedAnalysis(h2.history, inbox_cap=2)).valid == "unknown"


def test_bulk_follows_count_as_one_follow_per_pair_recorded_as_tuples_or_as_json_lists() -> None:
    for pairs in ([("a", "b"), ("c", "b")], [["a", "b"], ["c", "b"]]):  # a driver that records its JSON body's lists
        h = HandHistory()
        h.at(0).ok("follow_many", {"pairs": pairs}, {"added": 2})
        h.at(0.5).ok("unfollow", {"user_id": "a", "followee_id": "b"}, {})
        p = post("p1", "b", 1.0)
        h.at(1).ok("publish", {"author_id": "b", "text": "x"}, p)
        read = h.at(2).ok("read", read_args("c"), page([p]))
        a = FeedAnalysis(h.history)
        assert a.followed_ever(read) == {"b"} and feed_matches_pull_model(a).valid is True


# -- the load runs' checks: visibility lag, its charts, the fault scenarios' checks ------------------------


def watched(h: HandHistory, pid: str, t: float, shown: list[dict[str, Any]], watcher: str = "a") -> Any:
    """A watcher's poll for ``pid`` (process ``watch:<pid>``) at ``t`` that showed ``shown``."""
    return h.at(t).ok("read", read_args(watcher), page(shown), process=f"watch:{pid}")


def test_is_deleted_is_true_only_for_a_post_whose_delete_returned_ok() -> None:
    h, posts = three_posts()
    h.at(4).ok("delete", {"post_id": "p1"}, {})
    h.at(4).fail("delete", {"post_id": "p2"}, "not_found")
    h.at(4).info("delete", {"post_id": "p3"})
    a = FeedAnalysis(h.history)
    assert [a.is_deleted(p["post_id"]) for p in posts] == [True, False, False]


def test_a_watched_posts_lag_runs_from_its_publish_to_the_first_poll_that_showed_it() -> None:
    h, posts = three_posts()
    watched(h, "p3", 3.5, posts[:2][::-1])  # not yet
    shown = watched(h, "p3", 4.25, posts[::-1])
    watched(h, "p3", 5.0, posts[::-1])  # later polls do not move the lag
    watched(h, "p2", 6.0, [posts[0]])  # never shown
    h.at(6.5).ok("delete", {"post_id": "p2"}, {})
    h.at(7).info("read", read_args(), process="watch:p1")  # no answer: not a poll that counts
    watched(h, "ghost", 7.0, [])  # no ok publish of it: left out
    lags = {x["post_id"]: x for x in visibility_lags(h.history, FeedAnalysis(h.history))}
    assert set(lags) == {"p3", "p2"}
    assert lags["p3"]["lag"] == shown.complete_time - posts[2]["created_at"] and lags["p3"]["polls"] == 3
    assert lags["p3"]["published"] == posts[2]["created_at"] and lags["p3"]["deleted"] is False
    assert lags["p2"]["lag"] is None and lags["p2"]["deleted"] is True and lags["p2"]["polls"] == 1


def lag(published: float, lag_s: float | None, deleted: bool = False) -> dict[str, Any]:
    return {"post_id": f"p{published}", "published": published, "deleted": deleted, "lag": lag_s, "polls": 1}


def test_the_lag_charts_draw_the_share_seen_and_put_unseen_live_posts_at_the_watch_limit() -> None:
    lags = [lag(10.0, 0.5), lag(11.0, 0.25), lag(12.0, None), lag(13.0, None, deleted=True)]
    cdf, drift = lag_charts(lags, window=1.0, t0=10.0, watch_windows=3.0)
    assert cdf.series["seen within x"] == [(0.25, 0.25), (0.5, 0.5)]  # shares of all four watched posts
    assert drift.series["lag per post"] == [(0.0, 0.5), (1.0, 0.25)]
    assert drift.series["not seen within 3 s"] == [(2.0, 3.0)]  # the deleted one is not drawn
    assert drift.series["G2 window"] == [(0.0, 1.0), (2.0, 1.0)]
    assert "2 of 4 watched posts seen within 3 s" in cdf.note and "polls after 0.05 s" in cdf.note
    assert "not seen within 3 s" not in lag_charts(lags[:2], 1.0, 10.0, 3.0)[1].series


def test_the_lag_percentile_is_the_slos_nearest_rank() -> None:
    assert percentile([0.4, 0.1, 0.3, 0.2], 0.5) == 0.2 and percentile([0.4, 0.1, 0.3, 0.2], 0.99) == 0.4
    assert percentile([], 0.99) is None


BREACH = {"window": 1.0, "threshold": 100, "rate": 10.0, "predicted": 4.0, "seconds": 10.0, "t0": 0.0}
FOLLOWERS = {"small": [f"f{i}" for i in range(15)], "star": [f"s{i}" for i in range(500)]}


def slowed_run() -> HandHistory:
    """An author above the threshold (no inbox writes), then one whose 15 followers are 1.5 s of the
    consumer's 10 writes/s: the queue outlasts the 1 s window at that post's publish (0.5 s)."""
    h = HandHistory()
    for t, author in ((0.1, "star"), (0.5, "small")):
        op = h.at(t).ok("publish", {"author_id": author, "text": "x"}, post(f"{author}-1", author, t))
        op.intended_time = t
    return h


def test_a_breach_within_a_factor_two_of_the_runs_own_backlog_arithmetic_holds() -> None:
    samples = [(0.9, {"oldest_pending_age_s": 0.5}), (1.8, {"oldest_pending_age_s": 1.2})]
    r = g2_breach_matches_backlog_arithmetic(slowed_run().history, [], samples, FOLLOWERS, **BREACH)
    assert r.valid is True and r.first_violation is None
    assert r.counts["predicted_s (same arithmetic on this run's posts)"] == 0.5  # the star's post writes nothing
    assert r.counts["measured_s (publish time of the first fan-out to outlast the window)"] == 0.6
    assert r.actual is not None and r.actual.value == 1.8 - 1.2 and r.limit.value == (0.25, 1.0)


def test_a_breach_far_from_the_arithmetic_or_none_at_all_is_false() -> None:
    late = [(7.0, {"oldest_pending_age_s": 2.0})]
    r = g2_breach_matches_backlog_arithmetic(slowed_run().history, [], late, FOLLOWERS, **BREACH)
    assert r.valid is False and "measured breach 5.00 s vs 0.50 s" in r.first_violation
    never = g2_breach_matches_backlog_arithmetic(slowed_run().history, [lag(0.5, 0.2)], [], FOLLOWERS, **BREACH)
    assert never.valid is False and never.first_violation.startswith("G2 was never breached in 10 s")


def test_without_stats_the_breach_is_the_first_watched_post_seen_late_and_without_a_queue_the_seeds_figure() -> None:
    lags = [lag(0.2, 0.5), lag(3.0, 1.5), lag(2.5, None)]
    r = g2_breach_matches_backlog_arithmetic(HandHistory().history, lags, [], FOLLOWERS, **BREACH)
    assert r.counts["measured_s (first watched post seen later than the window, by publish time)"] == 2.5
    assert r.counts["predicted_s (same arithmetic on this run's posts)"] is None
    assert r.valid is True and r.limit.value == (2.0, 8.0)  # the seed's 4 s, within a factor of two


def test_a_consumer_that_could_not_be_slowed_leaves_the_breach_unknown() -> None:
    r = g2_breach_matches_backlog_arithmetic(slowed_run().history, [], [], FOLLOWERS, **BREACH, slowed=False)
    assert r.valid == "unknown" and "could not be slowed" in r.note


def test_a_degraded_read_must_not_be_empty_while_the_pull_model_has_posts() -> None:
    h, posts = three_posts()
    h.at(5).ok("read", read_args(), page(posts[::-1], degraded=True))
    h.at(5).ok("read", read_args(), page(posts[::-1]))  # not degraded: not this check's
    r = shard_down_feeds_correct_and_not_empty(FeedAnalysis(h.history))
    assert r.valid is True and r.counts["degraded_reads"] == 1 and r.counts["mean_items_per_degraded_page"] == 3
    empty = h.at(6).ok("read", read_args(), page([], degraded=True))
    r = shard_down_feeds_correct_and_not_empty(FeedAnalysis(h.history))
    assert r.valid is False and r.counts["empty_pages_with_posts_to_show"] == 1 and r.examples == [empty]
    assert r.first_violation.startswith("1 degraded pages were empty though the pull model had posts")


def test_no_degraded_read_leaves_the_shard_check_unknown() -> None:
    h, posts = three_posts()
    h.at(5).ok("read", read_args(), page(posts[::-1]))
    r = shard_down_feeds_correct_and_not_empty(FeedAnalysis(h.history))
    assert r.valid == "unknown" and r.counts == {"degraded_reads": 0}


def test_a_write_answered_about_another_request_or_one_post_id_for_two_publishes_is_a_violation() -> None:
    from peakproof.cases.feed.checks import answers_belong_to_who_asked

    def run(first_answer: dict[str, Any], second_answer: dict[str, Any]) -> Any:
        h = HandHistory()
        h.at(1.0).ok("follow", {"user_id": "a", "followee_id": "b"}, {"user_id": "a", "followee_id": "b"})
        h.at(2.0).ok("publish", {"author_id": "b", "text": "one"}, {"created_at": 2.0, **first_answer})
        h.at(3.0).ok("publish", {"author_id": "c", "text": "two"}, {"created_at": 3.0, **second_answer})
        return answers_belong_to_who_asked(FeedAnalysis(h.history))

    kept = run({"post_id": "p1", "author_id": "b", "text": "one"}, {"post_id": "p2", "author_id": "c", "text": "two"})
    assert kept.valid is True and kept.chances == 3
    other = run({"post_id": "p1", "author_id": "b", "text": "one"}, {"post_id": "p2", "author_id": "b", "text": "one"})
    assert other.valid is False and "author_id asked 'c', answered 'b'" in other.first_violation
    twice = run({"post_id": "p1", "author_id": "b", "text": "one"}, {"post_id": "p1", "author_id": "c", "text": "two"})
    assert twice.valid is False and "post id 'p1' answered two publishes" in twice.first_violation
    silent = run({"post_id": "p1"}, {"post_id": "p2"})  # a driver that reports no author: the follow alone judged
    assert silent.valid is True and silent.chances == 1


# -- cursors are opaque, page chains are followed by who read them, stated time precision -----------------

def five_posts(t: float = 1.0, step: float = 1.0) -> tuple[HandHistory, list[dict[str, Any]]]:
    h = HandHistory()
    h.at(0).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    h.at(0).ok("follow", {"user_id": "c", "followee_id": "b"}, {})
    posts = [post(f"p{i}", "b", t + i * step) for i in range(1, 6)]
    for p in posts:
        h.at(p["created_at"]).ok("publish", {"author_id": "b", "text": p["text"]}, p)
    return h, posts


def test_a_cursor_of_any_json_type_is_followed_like_a_string() -> None:
    for cursor in (2, "2", {"page": 2, "before": [5.0, "p5"]}, [2, "x"], 0):
        h, posts = five_posts()
        newest = posts[::-1]
        h.at(10).ok("read", read_args(limit=2), page(newest[:2], nxt=cursor))
        turn = h.at(11).ok("read", read_args(limit=2, cursor=cursor), page(newest[2:4], nxt=None))
        a = FeedAnalysis(h.history)
        assert a.bound(turn) == (newest[1]["created_at"], "p4"), cursor  # after the first page's last post
        r = pages_do_not_skip_or_repeat(a)
        assert r.valid is True and r.chances == 1, (cursor, r)
        h.at(12).ok("read", read_args(limit=2), page(newest[:2], nxt=cursor))
        h.at(13).ok("read", read_args(limit=2, cursor=cursor), page(newest[3:5], nxt=None))  # p3 skipped
        assert pages_do_not_skip_or_repeat(FeedAnalysis(h.history)).valid is False, cursor


def test_every_reader_s_second_page_may_carry_the_same_cursor_value() -> None:
    # a service that pages by number gives each reader, and each first page, the cursor 2; the chains are
    # told apart by who read them (reader and process), never by the value
    h, posts = five_posts()
    newest = posts[::-1]
    h.at(10).ok("read", read_args("a", 2), page(newest[:2], nxt=2), process="reader-1")
    h.at(10.1).ok("read", read_args("c", 1), page(newest[:1], nxt=2), process="reader-2")
    h.at(10.2).ok("read", read_args("a", 1), page(newest[:1], nxt=2), process="reader-3")
    h.at(11).ok("read", read_args("a", 2, cursor=2), page(newest[2:4], nxt=3), process="reader-1")
    h.at(11.1).ok("read", read_args("c", 1, cursor=2), page(newest[1:2], nxt=3), process="reader-2")
    h.at(11.2).ok("read", read_args("a", 1, cursor=2), page(newest[1:2], nxt=3), process="reader-3")
    r = pages_do_not_skip_or_repeat(FeedAnalysis(h.history))
    assert r.valid is True and r.chances == 3, r


def test_a_page_turn_whose_first_page_had_not_returned_is_no_chain() -> None:
    h, posts = five_posts()
    newest = posts[::-1]
    slow = h.at(10).ok("read", read_args(limit=2), page(newest[:2], nxt="c1"), pending=True)
    h.at(10.5).ok("read", read_args(limit=2, cursor="c1"), page(newest[3:5]))
    h.finish(slow)
    assert pages_do_not_skip_or_repeat(FeedAnalysis(h.history)).chances == 0


def ms_posts() -> tuple[HandHistory, list[dict[str, Any]]]:
    """Five posts in two milliseconds, sent cut to the millisecond, listed by the service's microseconds:
    p1, p4 and p2 of the first millisecond, in an order the post ids do not give."""
    h = HandHistory()
    h.at(0).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    cut = {"p1": 100.001, "p4": 100.001, "p2": 100.001, "p3": 100.002, "p5": 100.002}
    posts = {pid: post(pid, "b", t) for pid, t in cut.items()}
    for i, pid in enumerate(("p1", "p4", "p2", "p3", "p5")):
        h.at(1 + i).ok("publish", {"author_id": "b", "text": pid}, posts[pid])
    # by microseconds: p5, p3 (the second ms), then p2, p4, p1
    return h, [posts[p] for p in ("p5", "p3", "p2", "p4", "p1")]


def test_millisecond_times_with_their_precision_stated_are_judged_in_any_order_within_a_millisecond() -> None:
    from peakproof.cases.feed.checks import check_feed
    from peakproof.cases.feed.rules import OrderRules

    h, order = ms_posts()
    h.at(10).ok("read", read_args(limit=3), page(order[:3], nxt={"after": "p2"}))
    h.at(11).ok("read", read_args(limit=3, cursor={"after": "p2"}), page(order[3:], nxt=None))
    h.at(12).ok("read", read_args(limit=20), page(order))
    contract = {r.name: r.valid for r in check_feed(h.history)}
    assert contract["feed_is_newest_first"] is False  # by the contract's tie rule, p3 before p5 is wrong
    stated = {r.name: r for r in check_feed(h.history, rules=OrderRules(time_precision=0.001))}
    for name in ("feed_is_newest_first", "pages_do_not_skip_or_repeat", "feed_matches_pull_model"):
        assert stated[name].valid is True, stated[name]
    assert stated["pages_do_not_skip_or_repeat"].chances == 1


def test_a_stated_precision_still_catches_an_older_step_first_a_skip_and_a_repeat() -> None:
    from peakproof.cases.feed.checks import check_feed
    from peakproof.cases.feed.rules import OrderRules

    rules = OrderRules(time_precision=0.001)
    h, order = ms_posts()
    h.at(10).ok("read", read_args(limit=20), page([order[2], order[0], order[1], order[3], order[4]]))
    assert {r.name: r.valid for r in check_feed(h.history, rules=rules)}["feed_is_newest_first"] is False
    h, order = ms_posts()
    h.at(0.5).ok("publish", {"author_id": "b", "text": "old"}, post("p0", "b", 99.0))
    h.at(10).ok("read", read_args(limit=2), page(order[:2], nxt="k"))  # ends at a step's edge: 100.002
    h.at(11).ok("read", read_args(limit=5, cursor="k"), page([post("p0", "b", 99.0)]))  # skips the whole 100.001
    assert {r.name: r.valid for r in check_feed(h.history, rules=rules)}["pages_do_not_skip_or_repeat"] is False
    h, order = ms_posts()
    h.at(10).ok("read", read_args(limit=3), page(order[:3], nxt="k"))
    h.at(11).ok("read", read_args(limit=3, cursor="k"), page([order[2], order[3], order[4]]))  # p2 again
    assert {r.name: r.valid for r in check_feed(h.history, rules=rules)}["pages_do_not_skip_or_repeat"] is False


def test_order_rules_refuse_what_cannot_be_a_precision_or_a_tie_rule() -> None:
    import pytest

    from peakproof.cases.feed.rules import OrderRules

    for bad in ({"time_precision": -0.001}, {"time_precision": float("nan")}, {"ties": "by-id"}):
        with pytest.raises(ValueError, match="--time-precision|--ties"):
            OrderRules(**bad)


def test_a_graph_too_large_to_send_one_follow_at_a_time_names_the_scale_that_fits() -> None:
    from peakproof.cases.feed.workload import SMALL_GRAPH, graph_unfit

    said = graph_unfit(4 * SMALL_GRAPH, 0.02, waived=False)
    assert said is not None and "run at --scale 0.005 or below" in said and "--without bulk_graph" in said, said
    assert graph_unfit(4 * SMALL_GRAPH, 0.02, waived=True) is None  # stated: it all goes, one at a time
    assert graph_unfit(SMALL_GRAPH, 0.02, waived=False) is None
