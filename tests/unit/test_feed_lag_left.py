"""The URL properties wait out a stated lag from the latest write of its kind, not afresh at every step
(peakproof.cases.feed.properties.lag_left)."""

from __future__ import annotations

from peakproof.cases.feed.properties import LAG_MARGIN, lag_left
from peakproof.cases.feed.rules import OrderRules
from peakproof.history import History

RULES = OrderRules(fanout_lag=0.3, delete_lag=0.5)


def history_at(*writes: tuple[str, float]) -> History:
    now = [0.0]
    h = History(lambda: now[0])
    for f, answered in writes:
        now[0] = answered - 0.01
        op = h.invoke(0, f, {})
        now[0] = answered
        h.complete(op, "ok", {})
    return h


def test_a_read_right_after_a_write_waits_the_rest_of_its_kind_s_lag() -> None:
    h = history_at(("publish", 10.0))
    assert abs(lag_left(h.ops, ("publish",), RULES, 10.1) - (0.2 + LAG_MARGIN)) < 1e-9


def test_a_lag_already_run_out_or_a_kind_not_written_waits_nothing() -> None:
    h = history_at(("publish", 10.0), ("delete", 10.2))
    assert lag_left(h.ops, ("publish",), RULES, 11.0) == 0.0  # the fan-out rules drew it again and again: 0 s
    assert lag_left(h.ops, ("unfollow",), RULES, 10.2) == 0.0  # no lag stated for it, none written
    assert lag_left(history_at().ops, ("publish",), RULES, 5.0) == 0.0


def test_the_latest_write_of_the_kinds_and_the_longest_lag_decide() -> None:
    h = history_at(("delete", 10.0), ("publish", 10.4))
    # the publish answered last; the delete's lag (0.5) is the longer of the two kinds'
    assert abs(lag_left(h.ops, ("publish", "delete"), RULES, 10.5) - (0.4 + LAG_MARGIN)) < 1e-9
    assert lag_left(h.ops, ("publish", "delete"), OrderRules(), 10.5) == 0.0  # nothing stated: never a wait
