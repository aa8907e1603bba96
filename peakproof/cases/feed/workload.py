"""Case F, news feed: the seed's peak at a scaled user count, in compressed time."""

from __future__ import annotations

from typing import Any


class FeedWorkload:
    """Case F's peak at a scaled user count, in compressed time.

    * ``users`` = 1,000,000 x ``scale``; every account's follower count is drawn by the
      seed's own generator (MINSTD, Pareto base 33, exponent 1.16, capped at users - 1),
      and its followers uniformly among the others: follows proportional to popularity.
    * Rates are the seed's per-user rates (VH2, VH3 at the VH4 peak: 6.94 posts/s and
      277.78 reads/s per million users) times ``time_scale``; the G2 window is 60 s /
      ``time_scale``. Compressing time this way keeps the seed's arithmetic: the threshold
      (window x spare capacity) is unchanged and the slowed-consumer breach times divide
      by ``time_scale``.
    * The threshold, the consumer capacity (3x steady) and the slowed-consumer table come
      from the ported model (``peakproof.models.feed``) run at ``users``.
    * Beside them, ``newcomers`` (1% more users, ``n0``, ``n1``, ...) who follow
      ``NEWCOMER_FOLLOWS`` accounts well below the threshold and post like everyone: at a
      scaled-down user count nearly everyone follows an account above the threshold, and
      the report compares read latency with and without such accounts.
    """

    NEWCOMER_SHARE = 0.01
    NEWCOMER_FOLLOWS = 20

    def __init__(self, scale: float, time_scale: float = 1.0, seed: int = 20260730, prefix: str = "") -> None:
        from peakproof.models.feed import FeedParams, compute, followers

        if not 2 <= round(1_000_000 * scale):
            raise ValueError(f"scale must give at least 2 users (scale x 1,000,000); got {scale}")
        self.users = round(1_000_000 * scale)
        self.newcomers = max(1, round(self.users * self.NEWCOMER_SHARE))
        self.population = self.users + self.newcomers  # who reads and posts
        self.time_scale, self.seed, self.prefix = time_scale, seed, prefix
        base = compute(FeedParams(users=self.users, seed=seed))
        full = compute()  # full scale: the seed's own table
        seed_model = full["hybrid"]
        self.seed_mean_followers = full["fan_out_models"]["followers"]["mean"]
        h, k = base["fan_out_models"], base["hybrid"]
        self.window = 60.0 / time_scale
        self.post_rate = h["peak_posts_per_s"] * time_scale
        self.read_rate = h["peak_feed_requests_per_s"] * time_scale
        self.threshold = int(k["threshold"])
        self.steady = k["steady_fan_out"] * time_scale  # inbox writes/s with no threshold
        self.capacity = k["capacity"] * time_scale  # 3x steady: the consumers' rate
        chosen = next(r for r in k["rows"] if r["threshold"] == k["threshold"])
        self.write_work = chosen["write_work"] * time_scale  # writes/s of the posts below the threshold
        # the seed's slowed consumers as shares of its write work (1,200 / 1,000 / 700 of 1,247.71)
        seed_work = next(r for r in seed_model["rows"] if r["threshold"] == seed_model["threshold"])["write_work"]
        self.seed_slowed = [{**b, "share_of_write_work": b["consumer_rate"] / seed_work}
                            for b in seed_model["slowed_consumer"]]
        f, _ = followers(FeedParams(users=self.users, seed=seed))
        self.followers = [int(x) for x in f]
        self.model = base

    def user(self, i: int) -> str:
        return f"{self.prefix}u{i}" if i < self.users else f"{self.prefix}n{i - self.users}"

    def slowed(self, share: float) -> dict[str, float]:
        """A consumer at ``share`` of the write work: rate and the seed's arithmetic for the G2 breach."""
        rate = self.write_work * share
        growth = self.write_work - rate
        return {"rate": rate, "backlog_per_s": growth,
                "g2_breached_after_s": self.window * rate / growth if growth > 0 else float("inf")}

    def graph(self) -> tuple[list[tuple[str, str]], list[int]]:
        """(follow pairs (follower, account); how many above-threshold accounts each of the population
        follows). The seed users' pairs come first, then the newcomers'."""
        import numpy as np

        rng = np.random.default_rng(self.seed)
        n = self.users
        pairs: list[tuple[str, str]] = []
        above = [0] * self.population
        names = [self.user(i) for i in range(n)]
        for account, count in enumerate(self.followers):
            if count <= 0:
                continue
            chosen = rng.choice(n - 1, size=min(count, n - 1), replace=False)
            chosen = chosen + (chosen >= account)  # skip the account itself
            name = names[account]
            pairs.extend((names[int(u)], name) for u in chosen)
            if count > self.threshold:
                for u in chosen:
                    above[int(u)] += 1
        small = [i for i, c in enumerate(self.followers) if 0 < c <= self.threshold // 2] or [0]
        for j in range(self.newcomers):
            for account in rng.choice(len(small), size=min(self.NEWCOMER_FOLLOWS, len(small)), replace=False):
                pairs.append((self.user(n + j), names[small[int(account)]]))
        return pairs, above

    def describe(self) -> dict[str, Any]:
        return {"users": self.users, "newcomers (follow only accounts below the threshold)": self.newcomers,
                "time scale": self.time_scale, "G2 window (s)": round(self.window, 3),
                "posts/s": round(self.post_rate, 3), "feed reads/s": round(self.read_rate, 3),
                "mean followers": round(self.model["hybrid"]["mean_followers"], 2),
                "threshold (seed rule at this scale)": self.threshold,
                "accounts above the threshold": sum(1 for x in self.followers if x > self.threshold),
                "steady fan-out (writes/s)": round(self.steady, 2), "consumer capacity 3x steady (writes/s)":
                    round(self.capacity, 2), "write work below the threshold (writes/s)": round(self.write_work, 2)}


LOOKS_AFTER_DELETE = (1, 3)  # G2 windows after a delete (and its stated lag) a follower of its author looks

SMALL_GRAPH = 25_000  # follows the harness sends one at a time unasked, for a driver without bulk loading


def graph_unfit(follows: int, scale: float, waived: bool) -> str | None:
    """Why a graph of ``follows`` cannot go one follow at a time at ``scale`` (None: it can), with the
    scale that fits and the waiver that sends it all the same (``--without bulk_graph``)."""
    if follows <= SMALL_GRAPH or waived:
        return None
    fits = scale * SMALL_GRAPH / follows
    return (f"at --scale {scale:g} the graph is {follows:,} follows and the harness sends at most {SMALL_GRAPH:,} one "
            f"at a time unasked: run at --scale {fits:.2g} or below (about {SMALL_GRAPH:,} follows), or state "
            f"--without bulk_graph to send all {follows:,} one at a time, 32 at once")


def unfollow_followups(window: float, unfollow_lag: float = 0.0) -> tuple[float, float]:
    """When, after an unfollow, its user looks at their feed and when they follow again (s): a quarter and half
    a window on, and past a stated ``--unfollow-lag`` (plus the properties' margin) first. Without it, a lag
    of 0.3 s against a window of 0.6 s (time scale 100) had the look at 0.15 s, within the lag, and the refollow
    at 0.3 s, as it ran out: no read was ever judged and unfollowed_authors_never_shown came out INCONCLUSIVE."""
    settle = unfollow_lag + 0.05 if unfollow_lag > 0 else 0.0
    return settle + window / 4, settle + window / 2
