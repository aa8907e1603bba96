"""Quality: the feed properties catch the classic broken feeds, with a readable counterexample."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test

from peakproof.pytest_plugin import Target
from peakproof.targets.feed import FeedCore

from peakproof.cases.feed.properties import CAP, THRESHOLD, FeedMachine

from . import fixed_budget
from .test_tickets_quality import failure_text

BUDGET = fixed_budget(500, stateful_step_count=40, shrink=False)


class IgnoresDeletes(FeedCore):
    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        hidden, self.deleted = self.deleted, set()
        try:
            return super().read_view(user, limit, cursor)
        finally:
            self.deleted = hidden


class SortsByArrival(FeedCore):
    """Keeps each inbox in the order entries arrived (fan-out, backfill), not by time."""

    def _write(self, user: str, key: Any) -> None:
        inbox = self.inboxes.setdefault(user, [])
        if key not in inbox:
            inbox.append(key)
            del inbox[: max(0, len(inbox) - self.inbox_cap)]

    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        followed = self.following.get(user, set())
        items = [self.posts[k[1]] for k in reversed(self.inboxes.get(user, []))
                 if k[1] not in self.deleted and self.posts[k[1]].author_id in followed]
        return items[:limit], (items[limit - 1].key if len(items) >= limit else None), {}


class ForgetsUnfollows(FeedCore):
    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        real = self.following.get(user, set())
        self.following[user] = real | {p.author_id for p in self.posts.values()} - {user}
        try:
            return super().read_view(user, limit, cursor)
        finally:
            self.following[user] = real


class DropsAboveThreshold(FeedCore):
    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        hidden, self.pull_authors = self.pull_authors, set()
        try:
            return super().read_view(user, limit, cursor)
        finally:
            self.pull_authors = hidden


class DuplicatesAPost(FeedCore):
    """Merging the pulled authors with the inbox forgets to drop a post that is in both."""

    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        items, nxt, how = super().read_view(user, limit, cursor)
        if len(items) >= 2:
            items = [items[0], items[0], *items[1:limit - 1]]
        return items, nxt, how


class SkipsAtPageBoundary(FeedCore):
    """The page after a cursor leaves out its first post (an off-by-one in the cursor)."""

    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        if cursor is None:
            return super().read_view(user, limit, cursor)
        items, nxt, how = super().read_view(user, limit + 1, cursor)
        items = items[1:]
        return items, (nxt if len(items) >= limit else None), how


class UncappedInbox(FeedCore):
    """Inboxes grow without bound (the cap is forgotten on the write path)."""

    def _write(self, user: str, key: Any) -> None:
        import bisect

        inbox = self.inboxes.setdefault(user, [])
        if key not in inbox:
            bisect.insort(inbox, key)
            self.stats.inbox_writes += 1


@pytest.mark.parametrize("broken, caught_by", [
    (DuplicatesAPost, "no_duplicate_items"),
    (SkipsAtPageBoundary, "pages_do_not_skip_or_repeat"),
    (UncappedInbox, "inbox_capped"),
    (IgnoresDeletes, "deleted_posts_never_shown"),
    (SortsByArrival, ("feed_is_newest_first", "feed_matches_pull_model")),
    # it also shows authors never followed, which only the pull model can tell: either check may report it
    (ForgetsUnfollows, ("unfollowed_authors_never_shown", "feed_matches_pull_model")),
    (DropsAboveThreshold, "feed_matches_pull_model"),
])
def test_the_feed_machine_catches_a_broken_feed(broken: type[FeedCore], caught_by: str | tuple[str, ...]) -> None:
    class Machine(FeedMachine):
        target = Target("feed", in_process_options={
            "core_factory": lambda clock: broken(clock, threshold=THRESHOLD, inbox_cap=CAP)})

    with pytest.raises((AssertionError, BaseExceptionGroup)) as caught:
        run_state_machine_as_test(Machine, settings=BUDGET)
    report = failure_text(caught.value)
    print(f"\n{broken.__name__}: {report[:700]}")
    names = (caught_by,) if isinstance(caught_by, str) else caught_by
    assert any(f"{name}: FAIL" in report for name in names), report
