"""The feed checks, assembled: every promise module registers its checks on
:data:`~peakproof.cases.feed.analysis.FEED`; importing them here fills the list in the order written.

What the operations are and how uncertainty is treated: :mod:`peakproof.cases.feed.analysis`.
"""

from __future__ import annotations

from typing import Iterable

from peakproof.checks import CheckResult
from peakproof.history import History, Op
# each registers its checks on import, in this order: the timeline promises, then the answers
from . import timelines  # noqa: F401  isort: skip
from . import promises  # noqa: F401  isort: skip
from .analysis import FEED, WRITES, FeedAnalysis  # noqa: F401  (re-exported)
from .promises import answers_belong_to_who_asked  # noqa: F401
from .rules import CONTRACT, OrderRules  # noqa: F401  (re-exported)
from .timelines import (deleted_posts_never_shown, feed_is_newest_first, feed_matches_pull_model,  # noqa: F401
                        inbox_capped, no_duplicate_items, pages_do_not_skip_or_repeat, posts_visible_within_window,
                        unfollowed_authors_never_shown)

FEED_CHECKS = tuple(FEED)


def check_feed(history: "History | Iterable[Op] | FeedAnalysis", inbox_cap: int = 400,
               window: float = 60.0, rules: OrderRules = CONTRACT) -> list[CheckResult]:
    """Every feed invariant over one shared analysis of the history (``inbox_cap`` and the G2
    ``window`` are the target's: 400 entries and 60 s in the seed; ``rules`` how its times and
    ties read, as it states them)."""
    a = history if isinstance(history, FeedAnalysis) else FeedAnalysis(history, inbox_cap, window, rules)
    return FEED.run(a)
