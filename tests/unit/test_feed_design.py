"""The feed's design statements (peakproof/cases/feed/case.py DESIGN): what each makes a read show, judged both
ways on hand-written histories: the seed's design FAILs the product's behaviour, the stated one holds it, and the
statement still catches what it does not excuse."""

from __future__ import annotations

from typing import Any

import pytest

from peakproof.cases.feed.case import DESIGN, rules_of
from peakproof.cases.feed.checks import (FeedAnalysis, deleted_posts_never_shown, feed_matches_pull_model,
                                         unfollowed_authors_never_shown)
from peakproof.cases.feed.rules import OrderRules
from peakproof.design import stated_design
from peakproof.errors import UsageError
from peakproof.history import HandHistory
from peakproof.spec import RunSpec

from .test_feed_checks import page, post, read_args, three_posts


def judged(h: HandHistory, check: Any, **design: Any) -> Any:
    return check(FeedAnalysis(h.history, rules=OrderRules(**design)))


def test_an_unfollow_lag_holds_a_read_within_it_to_nothing_and_one_after_it_to_the_unfollow() -> None:
    h, posts = three_posts()
    h.at(5).ok("unfollow", {"user_id": "a", "followee_id": "b"}, {})
    h.at(5.5).ok("read", read_args(), page([posts[2]]))  # the worker has not run yet
    assert judged(h, unfollowed_authors_never_shown).valid is False  # the seed: at once
    assert judged(h, unfollowed_authors_never_shown, unfollow_lag=1.0).valid is not False
    assert judged(h, feed_matches_pull_model, unfollow_lag=1.0).chances == 0  # not quiet: not held to the model
    h.at(7).ok("read", read_args(), page([posts[2]]))  # 2 s on: the stated lag is over, the author still shows
    late = judged(h, unfollowed_authors_never_shown, unfollow_lag=1.0)
    assert late.valid is False and "after the unfollow returned" in late.first_violation


def test_a_delete_lag_holds_a_read_within_it_to_nothing_and_one_after_it_to_the_delete() -> None:
    h, posts = three_posts()
    h.at(5).ok("delete", {"post_id": "p3"}, {})
    h.at(5.5).ok("read", read_args(), page(posts[::-1]))
    assert judged(h, deleted_posts_never_shown).valid is False
    assert judged(h, deleted_posts_never_shown, delete_lag=1.0).valid is not False
    h.at(30).ok("read", read_args(), page(posts[::-1]))  # lost to the worker: still there long after
    lost = judged(h, deleted_posts_never_shown, delete_lag=1.0)
    assert lost.valid is False
    # how long it stayed tells a lost delete from a lag, stated or not: the FAIL says so
    assert lost.counts["longest_shown_after_delete_s"] >= 24.0 and "s after its delete" in lost.first_violation
    assert judged(h, deleted_posts_never_shown).counts["longest_shown_after_delete_s"] >= 24.0


def test_a_fanout_lag_leaves_a_fresh_post_out_of_the_model_until_the_lag_is_over() -> None:
    h, posts = three_posts()
    h.at(6).ok("publish", {"author_id": "b", "text": "p4"}, post("p4", "b", 6.0))
    h.at(6.2).ok("read", read_args(), page(posts[::-1]))  # settled, but p4 is not there yet
    assert judged(h, feed_matches_pull_model).valid is False
    held = judged(h, feed_matches_pull_model, fanout_lag=1.0)
    assert held.valid is not False
    h.at(9).ok("read", read_args(), page(posts[::-1]))  # 3 s on, still missing: a finding whatever the lag
    assert judged(h, feed_matches_pull_model, fanout_lag=1.0).valid is False


def test_what_a_follow_brings_in_is_what_a_settled_read_is_held_to() -> None:
    h = HandHistory()
    early = [post("p1", "b", 1.0), post("p2", "b", 2.0)]
    for p in early:
        h.at(p["created_at"]).ok("publish", {"author_id": "b", "text": p["text"]}, p)
    h.at(3).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    later = post("p3", "b", 4.0)
    h.at(4).ok("publish", {"author_id": "b", "text": "p3"}, later)
    h.at(5).ok("read", read_args(), page([later]))  # no backfill: only what came after the follow
    assert judged(h, feed_matches_pull_model).valid is False  # the seed's follow brings p1, p2 in
    assert judged(h, feed_matches_pull_model, follow_brings="nothing").valid is True
    assert judged(h, feed_matches_pull_model, follow_brings=1).valid is False  # the last one, p2, is missing
    h2 = HandHistory()
    for p in early:
        h2.at(p["created_at"]).ok("publish", {"author_id": "b", "text": p["text"]}, p)
    h2.at(3).ok("follow", {"user_id": "a", "followee_id": "b"}, {})
    h2.at(4).ok("publish", {"author_id": "b", "text": "p3"}, later)
    h2.at(5).ok("read", read_args(), page([later, early[1]]))
    assert judged(h2, feed_matches_pull_model, follow_brings=1).valid is True
    assert judged(h2, feed_matches_pull_model, follow_brings="nothing").valid is False  # p2 was not to come


def test_a_post_published_while_the_follow_was_in_flight_may_show_or_not() -> None:
    h = HandHistory()
    follow = h.at(1).ok("follow", {"user_id": "a", "followee_id": "b"}, {}, pending=True)
    racing = post("p1", "b", 1.5)
    h.at(1.5).ok("publish", {"author_id": "b", "text": "p1"}, racing)
    h.finish(follow)
    h.at(3).ok("read", read_args(), page([racing]))
    h.at(4).ok("read", read_args(), page([]))
    r = judged(h, feed_matches_pull_model, follow_brings="nothing")
    assert r.valid is True and r.chances == 2


def test_own_posts_shown_puts_the_reader_in_their_own_timeline() -> None:
    h, posts = three_posts()
    mine = post("m1", "a", 3.5)
    h.at(3.5).ok("publish", {"author_id": "a", "text": "m1"}, mine)
    h.at(5).ok("read", read_args(), page([mine, *posts[::-1]]))
    assert judged(h, feed_matches_pull_model).valid is False  # the seed: a post the model does not have
    assert judged(h, feed_matches_pull_model, own_posts=True).valid is True
    h.at(6).ok("read", read_args(), page(posts[::-1]))
    assert judged(h, feed_matches_pull_model, own_posts=True).valid is False  # stated, then left out


def test_the_statements_come_from_the_options_or_the_driver_and_bad_values_say_what_was_expected() -> None:
    spec = RunSpec(case="feed", case_options={"unfollow_lag": 0.6, "follow_brings": "nothing", "own_posts": True})
    rules = rules_of(spec)
    assert (rules.unfollow_lag, rules.follow_brings, rules.own_posts, rules.delete_lag) == (0.6, "nothing", True, 0.0)

    class Mastodonish:
        design = {"unfollow_lag": "0.8", "follow_brings": "40"}

    rules = rules_of(RunSpec(case="feed"), Mastodonish)
    assert (rules.unfollow_lag, rules.follow_brings) == (0.8, 40)
    assert rules_of(RunSpec(case="feed")) == OrderRules()  # nothing stated: the seed's design
    lines = stated_design(DESIGN, {"unfollow_lag": 0.6}).lines()
    assert lines == ["stated: --unfollow-lag 0.6 (your service applies an unfollow up to 0.6 s after it answers (a "
                     "worker takes the author's posts out of the timeline)); every check still judged"]
    with pytest.raises(UsageError, match="all, nothing or a number"):
        stated_design(DESIGN, {"follow_brings": "some"})
    with pytest.raises(UsageError, match="from 0 to 3600"):
        stated_design(DESIGN, {"delete_lag": "-1"})
    with pytest.raises(ValueError, match="--fanout-lag must be a number of seconds"):
        OrderRules(fanout_lag=-2)


def test_an_unstated_design_that_would_explain_a_fail_is_named_on_it() -> None:
    hint = stated_design(DESIGN).hint("unfollowed_authors_never_shown")
    assert hint is not None and "state --unfollow-lag" in hint and "otherwise this is a finding" in hint
    assert stated_design(DESIGN).hint("no_duplicate_items") is None  # no statement explains a duplicate


def test_a_reader_shown_their_own_post_after_unfollowing_themselves_is_explained_by_own_posts() -> None:
    """The URL properties unfollow a user from themselves too; a timeline of own posts then FAILs
    unfollowed_authors_never_shown, which --own-posts (not --unfollow-lag) explains: the hint names it, and stated
    the read holds."""
    h, posts = three_posts()
    mine = post("p-own", "a", 9.0)
    h.at(9).ok("publish", {"author_id": "a", "text": "t"}, mine)
    h.at(10).ok("unfollow", {"user_id": "a", "followee_id": "a"}, {})
    h.at(11).ok("read", read_args(), page([mine, posts[2]]))
    assert judged(h, unfollowed_authors_never_shown).failed
    assert "state --own-posts" in (stated_design(DESIGN).hint("unfollowed_authors_never_shown") or "")
    assert not judged(h, unfollowed_authors_never_shown, own_posts=True).failed
