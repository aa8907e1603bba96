"""Visibility lag: how long a watched post took to reach its watcher's first page.

The feed's load scenarios watch every published post that has a follower: one follower
polls their first page (process ``watch:<post_id>``) until the post shows. These pure
functions turn those polls into lags and charts; the fault checks in
:mod:`peakproof.cases.feed.faults` read the lags too.
"""

from __future__ import annotations

from typing import Any, Iterable

from peakproof.history import OK, History, Op
from peakproof.report import Chart
from peakproof.slo import statistic
from .analysis import FeedAnalysis

__all__ = ["WATCH_PREFIX", "POLLS_PER_WINDOW", "visibility_lags", "lag_charts", "percentile"]

WATCH_PREFIX = "watch:"  # a watcher's process: "watch:<post_id>"
POLLS_PER_WINDOW = 20  # the scenarios' first poll comes window / 20 after the publish (then 1.25x, at most window / 2)


def visibility_lags(history: History | Iterable[Op], analysis: FeedAnalysis) -> list[dict[str, Any]]:
    """For each watched post whose publish returned ok: the lag from its publish returning to the
    completion of the first ok poll that showed it (None: no poll showed it), whether a delete of
    it returned ok, and how many ok polls it had. Polls of posts with no ok publish are left out."""
    polls: dict[str, list[Op]] = {}
    for op in history.ops if isinstance(history, History) else history:
        if op.f == "read" and isinstance(op.process, str) and op.process.startswith(WATCH_PREFIX) and op.type == OK:
            polls.setdefault(op.process[len(WATCH_PREFIX):], []).append(op)
    out = []
    for post_id, ops in polls.items():
        published = analysis.published_at.get(post_id)
        if published is None:
            continue
        ops.sort(key=lambda o: o.invoke_seq)
        first = next((o for o in ops if any(i["post_id"] == post_id for i in o.value["items"])), None)
        out.append({"post_id": post_id, "published": published, "deleted": analysis.is_deleted(post_id),
                    "lag": None if first is None else first.complete_time - published, "polls": len(ops)})
    return out


def lag_charts(lags: list[dict[str, Any]], window: float, t0: float, watch_windows: float,
               polls_per_window: float = POLLS_PER_WINDOW) -> list[Chart]:
    """The visibility lag's distribution (CDF: the share of all watched posts seen within x s) and
    its drift over the run (each seen post's lag by publish time, ``t0`` the run's start; a post
    never seen and not deleted is drawn at the watch limit, ``watch_windows`` x ``window``)."""
    seen = sorted(x["lag"] for x in lags if x["lag"] is not None)
    n = len(lags)
    limit = watch_windows * window
    cdf = [(v, (i + 1) / n) for i, v in enumerate(seen)]
    by_time = sorted((x["published"] - t0, x["lag"]) for x in lags if x["lag"] is not None)
    unseen = sorted((x["published"] - t0, limit) for x in lags if x["lag"] is None and not x["deleted"])
    end = max([t for t, _ in by_time + unseen] or [1.0])
    note = (f"{len(seen):,} of {n:,} watched posts seen within {limit:.3g} s ({watch_windows:g} windows; the rest "
            f"are drawn at that limit); p50 {percentile(seen, 0.5)} s, p99 {percentile(seen, 0.99)} s, max "
            f"{max(seen, default=None)} s. A watcher polls after {window / polls_per_window:.3g} s, then 1.25x "
            f"longer each time (at most {window / 2:.3g} s), so a lag is an upper bound within about 25%.")
    series = {"lag per post": by_time, "G2 window": [(0.0, window), (end, window)]}
    if unseen:
        series[f"not seen within {limit:.3g} s"] = unseen
    return [Chart("Visibility lag distribution: share of watched posts seen within x s", "share of watched posts",
                  {"seen within x": cdf, "G2 window": [(window, 0.0), (window, 1.0)]}, x_label="lag (s)", note=note),
            Chart("Visibility lag of each watched post, by its publish time", "seconds of lag", series, note=note)]


def percentile(values: list[float], q: float) -> float | None:
    """The SLOs' percentile rule (nearest rank), rounded to 4 places, so a charted or printed p99 is
    the judged one; None for no values. ``q`` is a share (0.99 for p99)."""
    if not values:
        return None
    return round(statistic(sorted(values), f"p{q * 100:g}"), 4)
