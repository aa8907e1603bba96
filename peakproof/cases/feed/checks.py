"""The feed checks, assembled: every promise module registers its checks on
:data:`~peakproof.cases.feed.analysis.FEED`; importing them here fills the list in the order written.

The feed invariants, as pure functions of a history.

Operations: ``follow`` / ``unfollow`` (args user_id, followee_id), ``publish`` (args
author_id, text; ok value the post with post_id and created_at), ``delete`` (args
post_id), ``read`` (args user_id, limit, cursor; ok value {items: [post...],
next_cursor, and optionally backlog (fan-out entries still to write; 0 = settled) and
inbox_size, which the reference target reports}).

The pull model: at a read, the timeline a pure fan-in-on-read design would return: the
live posts of the authors the user follows, newest first (ties by post id). Writes that
overlap a read make it uncertain, so model comparisons use only reads no write overlapped.
"""

from __future__ import annotations

from typing import Iterable

from ...checks import CheckResult
from ...history import History, Op
# each registers its checks on import, in this order: the timeline promises, then the answers
from . import timelines  # noqa: F401  isort: skip
from . import promises  # noqa: F401  isort: skip
from .analysis import FEED, WRITES, FeedAnalysis  # noqa: F401  (re-exported)
from .promises import answers_belong_to_who_asked  # noqa: F401
from .timelines import (deleted_posts_never_shown, feed_is_newest_first, feed_matches_pull_model,  # noqa: F401
                        inbox_capped, no_duplicate_items, pages_do_not_skip_or_repeat, posts_visible_within_window,
                        unfollowed_authors_never_shown)

FEED_CHECKS = tuple(FEED)


def check_feed(history: "History | Iterable[Op] | FeedAnalysis", inbox_cap: int = 400,
               window: float = 60.0) -> list[CheckResult]:
    """Every feed invariant over one shared analysis of the history (``inbox_cap`` and the G2
    ``window`` are the target's: 400 entries and 60 s in the seed)."""
    a = history if isinstance(history, FeedAnalysis) else FeedAnalysis(history, inbox_cap, window)
    return FEED.run(a)
