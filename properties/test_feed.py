"""Case F invariants against a pure-pull model (in progress: in-process only so far).

A state machine with a small inbox cap and a small fan-out threshold, so that inboxes
overflow and authors cross the threshold both ways; Hypothesis chooses publishes, deletes,
follows, unfollows, reads, page turns, partial fan-out and time. After every step the
feed checks judge the whole history; ``feed_matches_pull_model`` compares every quiet
read with the pull model.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from peakproof.cases.feed import InProcessFeed, check_feed
from peakproof.checks import assert_checks

USERS = [f"u{i}" for i in range(4)]
CAP, THRESHOLD = 6, 1


class FeedMachine(RuleBasedStateMachine):
    core_factory: Any = None  # a quality test plugs a broken core here

    @initialize()
    def start(self) -> None:
        core = None
        if self.core_factory is not None:
            from peakproof.clock import VirtualClock

            clock = VirtualClock()
            core = self.core_factory(clock)
        self.d = InProcessFeed(core=core, threshold=THRESHOLD, inbox_cap=CAP)
        if core is not None:
            self.d.clock = core.clock
            self.d.history.clock = core.clock
        self.posts: list[str] = []
        self.pages: dict[str, Any] = {}

    @rule(user=st.sampled_from(USERS), followee=st.sampled_from(USERS))
    def follow(self, user: str, followee: str) -> None:
        if user != followee:
            self.d.follow(user, followee)

    @rule(author=st.sampled_from(USERS))
    def everyone_follows(self, author: str) -> None:
        # an author goes viral: past the threshold at once (so crossings are common)
        for user in USERS:
            if user != author:
                self.d.follow(user, author)

    @rule(user=st.sampled_from(USERS), followee=st.sampled_from(USERS))
    def unfollow(self, user: str, followee: str) -> None:
        self.d.unfollow(user, followee)

    @rule(author=st.sampled_from(USERS), same_instant=st.booleans())
    def publish(self, author: str, same_instant: bool) -> None:
        if not same_instant:
            self.d.advance(1.0)
        op = self.d.publish(author, f"post by {author}")
        self.posts.append(op.value["post_id"])

    @precondition(lambda self: bool(self.posts))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        self.d.delete(data.draw(st.sampled_from(self.posts), label="post"))

    @rule(user=st.sampled_from(USERS), limit=st.integers(1, 5))
    def read_first_page(self, user: str, limit: int) -> None:
        op = self.d.read(user, limit)
        self.pages[user] = (op.value or {}).get("next_cursor"), limit

    @rule(user=st.sampled_from(USERS))
    def read_next_page(self, user: str) -> None:
        cursor, limit = self.pages.get(user, (None, 3))
        if cursor:
            op = self.d.read(user, limit, tuple(cursor))
            self.pages[user] = (op.value or {}).get("next_cursor"), limit

    @rule(writes=st.integers(1, 4))
    def fan_out_progresses(self, writes: int) -> None:
        self.d.fanout(writes)

    @rule()
    def fan_out_catches_up(self) -> None:
        self.d.fanout()

    @invariant()
    def every_check_holds(self) -> None:
        if hasattr(self, "d"):
            # G2 in virtual time is the fan-out's business, which Hypothesis controls here
            assert_checks(r for r in check_feed(self.d.history, inbox_cap=CAP, window=float("inf")))


def test_feeds_match_the_pull_model_and_keep_every_invariant() -> None:
    run_state_machine_as_test(FeedMachine)


@pytest.mark.parametrize("policy", ["push", "pull"])
def test_the_pure_policies_keep_the_same_invariants(policy: str) -> None:
    from targets.feed import FeedCore

    class Machine(FeedMachine):
        core_factory = staticmethod(lambda clock: FeedCore(clock, policy=policy, inbox_cap=CAP))

    run_state_machine_as_test(Machine)
