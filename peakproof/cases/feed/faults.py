"""The feed's fault checks: what the fault scenarios (``feed-slow-consumer``, ``feed-shard-down``)
promise beyond the eight invariants. Pure functions of the history, its :class:`FeedAnalysis`,
the visibility lags (:func:`peakproof.cases.feed.lag.visibility_lags`) and the run's numbers.

They are load-only: not in ``FEED_CHECKS`` (a run without the fault could only leave them unknown).
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, Mapping

from peakproof.checks import CheckResult, Measure
from peakproof.history import OK, History, Op
from .analysis import FeedAnalysis

__all__ = ["g2_breach_matches_backlog_arithmetic", "shard_down_feeds_correct_and_not_empty"]


def g2_breach_matches_backlog_arithmetic(history: History | Iterable[Op], lags: list[dict[str, Any]],
                                         samples: list[tuple[float, dict[str, Any]]],
                                         followers: Mapping[str, Collection[Any]], *, t0: float, seconds: float,
                                         window: float, threshold: int, rate: float, predicted: float,
                                         slowed: bool = True) -> CheckResult:
    """With the fan-out consumers slowed to ``rate`` writes/s, G2 is first breached within a factor
    of two of when the seed's backlog arithmetic says (not a pass/fail of the target: how the
    measured breach compares with the arithmetic).

    The arithmetic: ``predicted`` (the seed's, at this scale), and the same queue run on this
    run's own posts (ok publishes with an intended time, by completion; each writes one inbox
    entry per follower in ``followers``, authors above ``threshold`` none): the first post
    after which the queue holds more than ``window`` s of work. The measure: the publish time
    (s from ``t0``) of the first fan-out to outlast the window, from the target's ``/_stats``
    ``samples`` ((time, stats) pairs; its ``oldest_pending_age_s``), else the publish time of
    the first watched post seen later than the window (or never). ``seconds``: the run's
    length. ``slowed=False`` (the consumer could not be slowed): unknown. Never breached: False.
    """
    if not slowed:
        return CheckResult("g2_breach_matches_backlog_arithmetic", "unknown", {},
                           note="the consumer could not be slowed: the target has no /_admin/fanout")
    # the seed's "breached after" is the publish time of the first post that waits longer than the
    # window; /_stats sees it a window later, as the oldest unfinished fan-out's age
    breach_stats = next((t - s["oldest_pending_age_s"] - t0 for t, s in samples
                         if t >= t0 and (s.get("oldest_pending_age_s") or 0) > window), None)
    late = [x for x in lags if (x["lag"] is None or x["lag"] > window) and x["published"] >= t0]
    breach_watch = min((x["published"] - t0 for x in late), default=None)
    # the same arithmetic on this run's own posts (few, their authors' follower counts heavy-tailed):
    # a queue drained at the consumer's rate; the first post that waits longer than the window
    ops = history.ops if isinstance(history, History) else history
    run_posts = sorted((op.complete_time - t0, len(followers.get(op.args["author_id"], ()))) for op in ops
                       if op.f == "publish" and op.type == OK and op.intended_time is not None)
    run_posts = [(t, n) for t, n in run_posts if n <= threshold]
    work = sum(n for t, n in run_posts if t <= seconds) / seconds
    backlog, last, real = 0.0, 0.0, float("inf")
    for t, n in run_posts:
        backlog = max(0.0, backlog - (t - last) * rate) + n
        last = t
        if backlog / rate > window:
            real = t
            break
    measured = breach_stats if breach_stats is not None else breach_watch
    counts = {"predicted_s (seed arithmetic, this scale)": round(predicted, 2),
              "write work this run queued (writes/s)": round(work, 2),
              "predicted_s (same arithmetic on this run's posts)": None if real == float("inf") else round(real, 2),
              "measured_s (publish time of the first fan-out to outlast the window)": None if breach_stats is None
              else round(breach_stats, 2),
              "measured_s (first watched post seen later than the window, by publish time)":
                  None if breach_watch is None else round(breach_watch, 2)}
    if measured is None:
        return CheckResult("g2_breach_matches_backlog_arithmetic", False, counts,
                           f"G2 was never breached in {seconds:g} s; the arithmetic says "
                           f"{predicted:.2f} s: the consumer was not slowed, or the run is too short")
    # within a factor of two of the arithmetic (the run's posts are few and their work heavy-tailed)
    ref = real if real != float("inf") else predicted
    ok = ref / 2 <= measured <= ref * 2
    # the breach as the first publish second whose post outlasted the window; the limit the
    # arithmetic's prediction within a factor of two
    return CheckResult("g2_breach_matches_backlog_arithmetic", ok, counts,
                       None if ok else f"measured breach {measured:.2f} s vs {ref:.2f} s from the backlog "
                                       f"arithmetic (factor 2 allowed)",
                       actual=Measure(measured, "s"), limit=Measure((ref / 2, ref * 2), "s", "in"))


def shard_down_feeds_correct_and_not_empty(a: FeedAnalysis) -> CheckResult:
    """With an inbox shard down, its users' reads (those the target reports ``degraded``) are never
    empty while the pull model has posts to show them (their correctness is judged by
    ``FEED_CHECKS`` over the same reads). No degraded read: unknown (the target has no shard
    fault, or no reader lived on the shard)."""
    degraded = [op for op in a.reads if op.value.get("degraded") is True]
    if not degraded:
        return CheckResult("shard_down_feeds_correct_and_not_empty", "unknown", {"degraded_reads": 0},
                           note="no read reported degraded: the target has no /_admin/fanout, or no reader "
                                "lived on the shard")
    empty = []
    for op in degraded:
        model = a.model(op)
        if model and model[0] and not op.value["items"]:
            empty.append(op)
    users = {op.args["user_id"] for op in degraded}
    counts = {"degraded_reads": len(degraded), "users_on_the_down_shard_seen": len(users),
              "empty_pages_with_posts_to_show": len(empty),
              "mean_items_per_degraded_page": round(sum(len(op.value["items"]) for op in degraded)
                                                    / len(degraded), 2)}
    return CheckResult("shard_down_feeds_correct_and_not_empty", not empty, counts,
                       None if not empty else f"{len(empty)} degraded pages were empty though the pull model "
                                              f"had posts: {empty[0]!r}"[:600], examples=empty[:3])
