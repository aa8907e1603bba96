"""Case F's models: the back-of-envelope and work of the two fan-out models
(``akis/hesap.mjs``) and the hybrid threshold (``akis/karma.mjs``), ported.

The follower distribution draws 1,000,000 Pareto values from MINSTD; it is vectorised
with NumPy (jump-ahead on the generator). Follower counts are integers, so every sum the
seeds take is exact in float64 whatever the order of addition.
"""

from __future__ import annotations

import math
from typing import Any

from .params import FeedParams
from .common import fx, js_fixed, minstd_uniforms, table

DAY = 86_400


def followers(p: FeedParams) -> tuple[Any, int]:
    """The follower count of every account (index order) and how many hit the cap."""
    import numpy as np

    u = minstd_uniforms(p.seed, p.users)
    raw = np.floor(p.pareto_base * np.power(u, -1 / p.pareto_exponent) + 0.5)  # Math.round
    at_cap = int(np.count_nonzero(raw > p.users - 1))
    return np.minimum(raw, p.users - 1), at_cap


def compute(p: FeedParams | None = None) -> dict[str, Any]:
    import numpy as np

    p = p or FeedParams()
    n = p.users
    posts_peak = n * p.posts_per_user / DAY * p.peak_factor
    reads_peak = n * p.feed_requests / DAY * p.peak_factor
    f, at_cap = followers(p)
    ordered = np.sort(f)
    total = float(ordered.sum())
    mean = total / n

    def pct(q: float) -> int:
        return int(ordered[math.floor(q * n)])

    top_start = math.trunc(n - n / 1000)
    top_share = float(ordered[top_start:].sum()) / total
    write_work, read_work = posts_peak * mean, reads_peak * mean
    doubled = n * p.feed_requests * 2 / DAY * p.peak_factor * mean
    hesap = {"peak_posts_per_s": posts_peak, "peak_feed_requests_per_s": reads_peak,
             "read_write_ratio": reads_peak / posts_peak,
             "inbox_store_gb": n * p.inbox_entries * p.entry_bytes / 1e9,
             "followers": {"mean": mean, "p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "p99_9": pct(0.999),
                           "max": int(ordered[-1]), "at_cap": at_cap, "top_0_1pct_edge_share": top_share},
             "fan_out_on_write": {"per_write": mean, "per_read": 1.0, "work_per_s": write_work + reads_peak},
             "fan_in_on_read": {"per_write": 1.0, "per_read": mean, "work_per_s": read_work + posts_peak},
             "ratio": (read_work + posts_peak) / (write_work + reads_peak),
             "doubling_reads": {"fan_in_from": read_work, "fan_in_to": doubled, "fan_out": write_work}}

    cum = np.concatenate(([0.0], np.cumsum(ordered)))  # exact: integer-valued float64 below 2^53

    def split(threshold: float) -> dict[str, Any]:
        below = int(np.searchsorted(ordered, threshold, side="right"))  # accounts with f <= threshold
        low, high = float(cum[below]), total - float(cum[below])
        return {"threshold": threshold, "accounts_above": n - below, "write_work": posts_peak * (low / n),
                "read_work": reads_peak * (high / n), "largest_below": float(ordered[below - 1]) if below else 0.0}

    steady = split(n)["write_work"]
    capacity = p.capacity_factor * steady
    chosen_threshold = math.floor(p.window * (capacity - steady) + 0.5)
    rows = []
    for t in [*p.thresholds, chosen_threshold, n]:
        r = split(t)
        rows.append({**r, "total_work": r["write_work"] + r["read_work"], "largest_burst_per_s": r["largest_below"] / p.window})
    chosen = split(chosen_threshold)
    backlog = []
    for rate in p.consumer_rates:
        growth = chosen["write_work"] - rate
        backlog.append({"consumer_rate": rate, "backlog_per_s": growth,
                        "g2_breached_after_s": p.window * rate / growth if growth > 0 else None})
    karma = {"steady_fan_out": steady, "capacity": capacity, "left_for_one_post": capacity - steady,
             "threshold": chosen_threshold, "rows": rows,
             "chosen": {"accounts_above": chosen["accounts_above"], "extra_sources_per_read": chosen["read_work"] / reads_peak,
                        "total_work": chosen["write_work"] + chosen["read_work"],
                        "total_vs_no_threshold": (chosen["write_work"] + chosen["read_work"]) / steady},
             "no_threshold": {"largest_post_writes_per_s": float(ordered[-1]) / p.window,
                              "times_steady": float(ordered[-1]) / p.window / steady},
             "slowed_consumer": backlog, "mean_followers": mean,
             "edge_share_above": chosen["read_work"] / reads_peak / mean}
    return {"params": p.describe(), "fan_out_models": hesap, "hybrid": karma}


def render(r: dict[str, Any]) -> str:
    h, k, p = r["fan_out_models"], r["hybrid"], r["params"]
    fo, fi, fl = h["fan_out_on_write"], h["fan_in_on_read"], h["followers"]
    out = ["Case F, feed: back-of-envelope and the two fan-out models (akis/hesap.mjs)",
           f"  peak posts/s = {js_fixed(h['peak_posts_per_s'], 2)}   peak feed requests/s = "
           f"{js_fixed(h['peak_feed_requests_per_s'], 2)}   read/write = {js_fixed(h['read_write_ratio'], 2)}",
           f"  inbox store = {js_fixed(h['inbox_store_gb'], 2)} GB ({p['inbox_entries']} entries per user)",
           f"  followers: mean {js_fixed(fl['mean'], 2)}  p50 {fl['p50']:,}  p90 {fl['p90']:,}  p99 {fl['p99']:,}  "
           f"p99.9 {fl['p99_9']:,}  max {fl['max']:,}  accounts at the cap {fl['at_cap']:,}",
           f"  the top 0.1% of accounts hold {js_fixed(fl['top_0_1pct_edge_share'], 4)} of all edges", "",
           table(["model", "work per write", "work per read", "work/s at peak"],
                 [["fan-out on write", fx(fo["per_write"], 2), "1.00", fx(fo["work_per_s"], 2)],
                  ["fan-in on read", "1.00", fx(fi["per_read"], 2), fx(fi["work_per_s"], 2)]]),
           f"  ratio = {js_fixed(h['ratio'], 2)}",
           f"  VH3 sensitivity: feed requests x2 -> fan-in {fx(h['doubling_reads']['fan_in_from'], 2)} -> "
           f"{fx(h['doubling_reads']['fan_in_to'], 2)} work/s, fan-out stays {fx(h['doubling_reads']['fan_out'], 2)} work/s",
           "", "Hybrid threshold (akis/karma.mjs)",
           f"  steady fan-out = {fx(k['steady_fan_out'], 2)} inbox writes/s, capacity {fx(k['capacity'], 2)}/s, "
           f"left for one post {fx(k['left_for_one_post'], 2)}/s -> over the {p['window']:g} s window, threshold = "
           f"{k['threshold']:,} followers", "",
           table(["threshold", "accounts above", "write work/s", "read work/s", "total/s", "largest burst/s"],
                 [[f"{x['threshold']:,}", f"{x['accounts_above']:,}", fx(x["write_work"], 2), fx(x["read_work"], 2),
                   fx(x["total_work"], 2), fx(x["largest_burst_per_s"], 2)] for x in k["rows"]], first_left=False),
           "",
           f"  at the chosen threshold: {k['chosen']['accounts_above']:,} accounts merged at read time, "
           f"{js_fixed(k['chosen']['extra_sources_per_read'], 3)} extra sources per feed request, total work "
           f"{fx(k['chosen']['total_work'], 2)}/s ({js_fixed(k['chosen']['total_vs_no_threshold'], 2)}x no threshold)",
           f"  without a threshold the largest single post needs {fx(k['no_threshold']['largest_post_writes_per_s'], 2)} "
           f"inbox writes/s = {js_fixed(k['no_threshold']['times_steady'], 2)}x steady", "",
           table(["consumer capacity", "backlog/s", "G2 breached after"],
                 [[f"{fx(b['consumer_rate'], 0)} writes/s", fx(b["backlog_per_s"], 2),
                   "never" if b["g2_breached_after_s"] is None else f"{fx(b['g2_breached_after_s'], 2)} s"]
                  for b in k["slowed_consumer"]]),
           f"  mean followers {js_fixed(k['mean_followers'], 2)}; share of edges above the threshold "
           f"{js_fixed(k['edge_share_above'], 4)}"]
    return "\n".join(out)
