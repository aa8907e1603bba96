"""Quality: the feed properties catch the classic broken feeds, with a readable counterexample."""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from peakproof.pytest_plugin import Target
from peakproof.targets.feed import FeedCore

from peakproof.cases.feed.properties import CAP, THRESHOLD, FeedMachine

from tests.support.broken_feeds import (DropsAboveThreshold, DuplicatesAPost, ForgetsUnfollows, IgnoresDeletes,
                                         SkipsAtPageBoundary, SortsByArrival, UncappedInbox)
from tests.support.search import failure_text, fixed_budget

BUDGET = fixed_budget(500, stateful_step_count=40, shrink=False)


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
