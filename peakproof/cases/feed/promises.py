"""``answers_belong_to_who_asked`` for the feed: every write's answer is about the request that
asked. In ``FEED_CHECKS``; :mod:`peakproof.cases.feed.checks` re-exports it."""

from __future__ import annotations

from peakproof.checks import CheckResult, Violations, judge_answer
from peakproof.history import OK
from .analysis import FEED, FeedAnalysis

__all__ = ["answers_belong_to_who_asked"]

ASKED = {"follow": ("user_id", "followee_id"), "unfollow": ("user_id", "followee_id"),
         "publish": ("author_id", "text"), "delete": ("post_id",)}


@FEED.register
def answers_belong_to_who_asked(a: FeedAnalysis) -> CheckResult:
    """A follow or unfollow answers about the user and followee it named, a publish about its author
    and text, a delete about the post it named; and one post id never stands for two publishes (a
    server that answered a post with another's id, or handed out one id twice). Fields a driver does
    not report are not judged."""
    v = Violations()
    answers = 0
    published: dict[str, object] = {}  # post id -> the publish it answered
    for op in a.ops:
        if op.type != OK or not isinstance(op.value, dict) or op.f not in ASKED:
            continue
        if judge_answer(op, {k: op.args.get(k) for k in ASKED[op.f]}, v):
            answers += 1
        if op.f == "publish" and op.value.get("post_id") is not None:
            pid = str(op.value["post_id"])
            first = published.setdefault(pid, op)
            if first is not op:
                v.add(f"post id {pid!r} answered two publishes: {first!r} and {op!r}", op)
    return v.result("answers_belong_to_who_asked", {"answers": answers, "posts": len(published)},
                    chances=answers, chance_kind="write answers that name their request")
