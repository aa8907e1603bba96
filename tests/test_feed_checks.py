"""FeedAnalysis and the feed checks on hand-written histories: each rule, both ways."""

from __future__ import annotations

from typing import Any

from peakproof.cases.feed.checks import (FeedAnalysis, deleted_posts_never_shown, feed_is_newest_first,
                                         feed_matches_pull_model, inbox_capped, no_duplicate_items,
                                         pages_do_not_skip_or_repeat, unfollowed_authors_never_shown)
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


def test_bulk_follows_count_as_one_follow_per_pair() -> None:
    h = HandHistory()
    h.at(0).ok("follow_many", {"pairs": [("a", "b"), ("c", "b")]}, {"added": 2})
    p = post("p1", "b", 1.0)
    h.at(1).ok("publish", {"author_id": "b", "text": "x"}, p)
    read = h.at(2).ok("read", read_args("c"), page([p]))
    a = FeedAnalysis(h.history)
    assert a.followed_ever(read) == {"b"} and feed_matches_pull_model(a).valid is True
