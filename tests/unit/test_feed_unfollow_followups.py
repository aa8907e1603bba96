"""The load's unfollower looks, and re-follows, past a stated unfollow lag (peakproof.cases.feed.workload, used by its load)."""

from __future__ import annotations

from peakproof.cases.feed.workload import unfollow_followups


def test_without_a_stated_lag_the_look_and_the_refollow_keep_a_quarter_and_half_a_window() -> None:
    assert unfollow_followups(0.6) == (0.15, 0.3)


def test_a_stated_unfollow_lag_puts_the_look_past_it_and_before_the_refollow() -> None:
    lag = 0.3
    look, refollow = unfollow_followups(0.6, lag)
    # the look is judged (the lag ran out before it) and sees the author still unfollowed (no refollow yet)
    assert lag < look < refollow
    plain = unfollow_followups(0.6)
    assert abs((refollow - look) - (plain[1] - plain[0])) < 1e-9  # as long a look before the refollow as unstated
