"""Case F's peak as open-model Locust scenarios (``loadtests/feed.py`` hands Locust over to them):
``--scenario feed-peak`` and its faults.

A graph drawn from the seed's Pareto (base 33, exponent 1.16, the seed's MINSTD draws) at
``--scale`` x 1,000,000 users is built through ``POST /admin/graph``; then the seed's
peak mix per user (6.94 posts/s and 277.78 feed reads/s per million users) for
``--duration`` s, in time compressed by ``--time-scale`` (rates x T, the 60 s G2 window
/ T: the seed's threshold and backlog arithmetic are unchanged, breach times divide by T),
plus churn: 10% of first pages turn a page, half a post's rate of unfollows (each of an author on the
unfollower's first page, re-followed half a window later, and after a stated --unfollow-lag), 10% of posts deleted
(half right after their publish answered, half within a window; each process's first 3 posts with a follower deleted
at once; a follower of the author looks one and three windows after the delete). Every published
post with a follower is watched: one follower polls their first page every window / 20
until it shows (visibility lag).

On the reference target the scenario sets the threshold (the seed's rule at this scale)
and the consumers' capacity (3x steady) through ``/_admin/fanout`` and samples ``/_stats``
(fan-out backlog, freshness); another target keeps its own and those charts say so.

Faults: ``feed-slow-consumer`` (the consumers at ``--consumer-share`` of the write work,
the seed's 1,000-of-1,247.71 row by default: freshness drifts, G2 is breached at a time
the seed's arithmetic predicts) and ``feed-shard-down`` (inbox shard 0 down for the run:
its users are served by fan-in over every followee, correct and not empty).

    locust -f loadtests/ --headless --host http://127.0.0.1:8000/feed \\
        --scenario feed-peak --scale 0.01 --time-scale 20 --duration 30
"""

from __future__ import annotations

import gc
import time
import uuid
from typing import Any

from peakproof import nemesis
from peakproof.arrivals import arrival_times, constant
from peakproof.checks import CheckResult
from peakproof.errors import SetupFailed
from peakproof.history import OK, History
from peakproof.load.engine import OpenModelUser, ScenarioShape
from peakproof.load.scenario import Arrival, Calibration, Context, Handler, Scenario, scenario
from peakproof.report import Chart
from peakproof.run import Run

from .analysis import FeedAnalysis
from .case import CASE
from .faults import g2_breach_matches_backlog_arithmetic, shard_down_feeds_correct_and_not_empty
from .lag import POLLS_PER_WINDOW
from .workload import LOOKS_AFTER_DELETE, unfollow_followups
from .report import FeedObserved, judge_feed
from .workload import SMALL_GRAPH, FeedWorkload, graph_unfit

__all__ = ["OpenModelUser", "ScenarioShape", "FeedPeak", "FeedSlowConsumer", "FeedShardDown", "FeedCalibrate"]

PAGE_TURN_SHARE = 0.10
UNFOLLOW_PER_POST = 0.5
DELETE_SHARE = 0.10
AT_ONCE_SHARE = 0.5  # of the deleted posts: deleted right after their publish answered
AIMED_AT_ONCE = 3  # posts with a follower each process deletes right after their publish, first
WATCH_WINDOWS = 3.0  # a watched post is polled for at most this many windows
PRELOAD_PER_USER = 0.2  # posts published before the peak (one day of VH2), so feeds have pages
HEAVY_READER_POSTS = 440  # preloaded posts of the heavy reader's followees: more than the 400 an inbox keeps
HEAVY_READS_PER_S = 2.0
# deletes of the heavy reader's preloaded posts: already fanned out, so even the slowed-consumer
# fault (whose backlog arithmetic forbids deleting new posts) gives deleted_posts_never_shown its chance
HEAVY_DELETES_PER_S = 0.5


def seed_peak_per_s() -> float:
    """The seed's full-scale peak (1,000,000 users, real time): feed reads plus posts per second."""
    return CASE.peak_rate()


@scenario
class FeedPeak(Scenario):
    name = f"{CASE.name}-peak"
    case = CASE.name
    description = "Case F: the peak mix (277.78 reads/s, 6.94 posts/s per million users) on a Pareto graph"
    default_slos = ["first_page:p99<=200ms"]  # G1
    delete_share = DELETE_SHARE
    watch_windows = WATCH_WINDOWS
    g2_judged = True  # G2 is judged (a fault meant to break it shows it instead)

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        spec = run.spec
        self.run_id = ""
        self.seconds = float(spec.duration or 30.0)
        self.work = FeedWorkload(spec.number_scale, spec.number_time_scale, spec.seed)
        self._arrivals: list[Arrival] | None = None
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self.reference = False
        self.above: list[int] = []
        self.fault: dict[str, Any] = {}
        self._followers: dict[str, list[str]] | None = None
        self._pairs: list[tuple[str, str]] | None = None
        self._following: dict[str, list[str]] | None = None
        self._posted: set[str] = set()  # authors with posts (this process knows of): worth unfollowing
        self._aimed = 0  # posts this process deleted right after their publish
        self._heavy_posts: list[str] = []  # preloaded (already fanned-out) posts the heavy reader sees

    def params(self) -> dict[str, Any]:
        return {**self.work.describe(), "seconds": self.seconds, "run id": self.run_id,
                "reference target (threshold and capacity set)": self.reference, **self.fault}

    def _driver(self, history: History | None = None, transport: Any = None) -> Any:
        return self.driver(history, transport)

    # -- master / local ----------------------------------------------------------------------------

    def setup(self) -> dict[str, Any]:
        self.run_id = uuid.uuid4().hex[:6]
        self.work.prefix = f"{self.run_id}-"
        self._pairs = None
        d = self._driver()
        # unbounded consumers while the timelines are filled; the seed's capacity for the run
        stats = d.admin(threshold=self.work.threshold, rate=None, shards_down=[]) if self.has(d, "faults") else None
        self.reference = stats is not None
        t0 = time.monotonic()
        load_graph(self, d, self._graph())
        self.graph_seconds = time.monotonic() - t0
        t0 = time.monotonic()
        self.preload(d)
        self.preload_seconds = time.monotonic() - t0
        if self.reference:
            d.admin(rate=self.work.capacity)
        self.configure_fault(d)
        self.setup_history = d.history
        return {"run_id": self.run_id, "posted": sorted(self._posted), "heavy_posts": self._heavy_posts}

    def preload(self, d: Any) -> None:
        """Posts from before the peak, so timelines have pages to turn (0.2 per user: one day's VH2)."""
        import random

        import gevent.pool

        rnd = random.Random(self.spec.seed)
        w = self.work
        authors = [w.user(rnd.randrange(w.population)) for _ in range(max(100, round(w.population * PRELOAD_PER_USER)))]
        # The heavy reader (the first newcomer) follows accounts that between them posted more than
        # an inbox keeps: inbox_capped gets its chance, and that reader's pages run deep.
        _, following = self._graph_index()
        followees = following.get(self.heavy_reader(), [])
        if followees:
            each = -(-(HEAVY_READER_POSTS) // len(followees))
            authors += [f for f in followees for _ in range(each)]
        pool = gevent.pool.Pool(16)
        self._posted.update(authors)
        for i, author in enumerate(authors):
            pool.spawn(d.publish, author, f"earlier post {i} by {author}", process="preload")
        pool.join()
        mine = set(followees)
        self._heavy_posts = [op.value["post_id"] for op in d.history.ops
                             if op.f == "publish" and op.type == OK and op.args["author_id"] in mine]
        bad = [op for op in d.history.ops if op.f == "publish" and op.type != OK]
        if bad:
            self.off_contract(bad[0])
        if len(bad) > len(authors) // 100:
            raise SetupFailed(f"{len(bad)} of {len(authors)} preload posts failed on {self.host}: {bad[0]!r}")
        # let their fan-out finish before the peak (bounded: a target whose fan-out is stuck is judged
        # by the run, not waited for): the reference target says when
        deadline = time.monotonic() + max(10.0, 20 * w.window)
        while time.monotonic() < deadline:
            st = d.stats() if self.reference and self.has(d, "stats") else None
            if st is None:  # another target: one G2 window, and until its fan-out of the preload has landed
                time.sleep(w.window)
                self._until_the_preload_landed(d, deadline)
                break
            if st["backlog"] == 0:
                break
            time.sleep(0.1)

    def _until_the_preload_landed(self, d: Any, deadline: float) -> None:
        """A target that fans out in a worker of its own drains the preload (a thousand posts at once, each to its
        followers) long after its publishes answered: judged from the peak's first read, that backlog was a post
        3.1 s late against a 3 s window, setup's lag blamed on the peak. Its newest post for the heavy reader on
        their first page says it has landed (jobs drain in order); the look is the harness's own, not the run's
        (a driver of its own history, never judged), and bounded by ``deadline``."""
        mine = set(self._heavy_posts)
        landed = [op for op in d.history.ops if op.f == "publish" and op.type == OK and op.value["post_id"] in mine]
        if not landed:
            return
        newest = max(landed, key=lambda op: op.complete_time).value["post_id"]
        probe = self._driver()
        while time.monotonic() < deadline:
            op = probe.read(self.heavy_reader(), 20, process="preload-watch")
            if op.type == OK and any(str(i.get("post_id")) == str(newest) for i in op.value.get("items") or ()):
                return
            time.sleep(self.work.window / 4)

    def heavy_reader(self) -> str:
        return self.work.user(self.work.users)  # the first newcomer: follows only accounts below the threshold

    def configure_fault(self, d: Any) -> None:
        """A fault scenario injects its fault here (reference target only)."""

    def adopt(self, shared: dict[str, Any]) -> None:
        self._posted.update(shared.get("posted", ()))
        self._heavy_posts = list(shared.get("heavy_posts", ()))
        if shared["run_id"] != self.run_id:  # a worker: draw the same graph under the master's run id
            self.run_id = shared["run_id"]
            self.work.prefix = f"{self.run_id}-"
            self._pairs = None
        self._graph_index()  # before the dispatch starts: it takes a second or two
        # millions of graph objects live all run: out of the collector's sight, or its full passes
        # stall the dispatcher (late sends, latency from the intended instant) for hundreds of ms
        gc.freeze()

    def monitor(self, history: History, now: float | None) -> None:
        if self.reference:
            st = self._driver().stats()
            if st is not None:
                self.samples.append((time.time(), st))

    def finish(self, history: History) -> None:
        history.prepend(getattr(self, "setup_history", History(time.time)).ops)
        self.monitor(history, None)
        if self.reference:
            self._driver().admin(shards_down=[], rate=self.work.capacity)

    # -- every dispatching process ---------------------------------------------------------------------

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            w = self.work
            kinds = [("read", w.read_rate), ("publish", w.post_rate), ("unfollow", w.post_rate * UNFOLLOW_PER_POST),
                     ("heavy-read", HEAVY_READS_PER_S), ("heavy-delete", HEAVY_DELETES_PER_S)]
            out: list[Arrival] = []
            for j, (kind, rate) in enumerate(kinds):
                times = arrival_times(constant(rate, self.seconds, kind), self.spec.spacing,
                                      self.spec.seed + j)
                out += [Arrival(t, kind, i) for i, t in enumerate(times)]
            self._arrivals = sorted(out, key=lambda a: a.t)
        return self._arrivals

    def bound_seconds(self) -> float:
        # the last delete (a window after its publish at most) and its looks, past a stated lag
        looks = 1 + max(LOOKS_AFTER_DELETE) + self.run.rules().delete_lag / self.work.window
        return self.seconds + max(self.watch_windows, looks) * self.work.window + 30

    def peak_rate(self) -> float:
        return seed_peak_per_s()

    def _graph(self) -> list[tuple[str, str]]:
        if getattr(self, "_pairs", None) is None:
            self._pairs, self.above = self.work.graph()
            self._followers = None
        return self._pairs  # type: ignore[return-value]

    def _graph_index(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        if self._followers is None:
            pairs = self._graph()
            followers: dict[str, list[str]] = {}
            following: dict[str, list[str]] = {}
            for u, a in pairs:
                followers.setdefault(a, []).append(u)
                following.setdefault(u, []).append(a)
            self._followers, self._following = followers, following
        return self._followers, self._following  # type: ignore[return-value]

    def handlers(self) -> dict[str, Handler]:
        return {"read": self.read, "publish": self.publish, "watch": self.watch, "delete": self.delete,
                "unfollow": self.unfollow, "heavy-read": self.heavy_read, "heavy-delete": self.heavy_delete,
                "read-after-unfollow": self.read_after_unfollow, "refollow": self.refollow,
                "look-after-delete": self.look_after_delete}

    def read(self, ctx: Context, a: Arrival) -> None:
        d, rnd, w = ctx.driver, ctx.random, self.work
        user = w.user(rnd.randrange(w.population))
        op = d.read(user, 20, process=f"reader-{a.data}", intended_time=ctx.intended(a.t))
        if op.type == OK and op.value.get("next_cursor") is not None and rnd.random() < PAGE_TURN_SHARE:
            d.read(user, 20, op.value["next_cursor"], process=f"reader-{a.data}")

    def publish(self, ctx: Context, a: Arrival) -> None:
        d, rnd, w = ctx.driver, ctx.random, self.work
        followers, _ = self._graph_index()
        author = w.user(rnd.randrange(w.population))
        op = d.publish(author, f"post {a.data} by {author}", process=f"author-{a.data}", intended_time=ctx.intended(a.t))
        if op.type != OK:
            return
        self._posted.add(author)
        fans = followers.get(author, [])
        watcher = fans[rnd.randrange(len(fans))] if fans else None
        if watcher is not None:
            ctx.later(0.0, "watch", (op.value["post_id"], watcher, time.time(), w.window / POLLS_PER_WINDOW))
        # aimed: a delete sent right after its publish, while the post's fan-out may still be on its way (a worker
        # that writes the post over its delete leaves it shown for good): each process's first AIMED_AT_ONCE posts
        # with a follower, then half the deleted share. At random within a window alone, a small run (7 posts in
        # 10 s at --scale 0.001) deleted none that young, and a worker that loses such deletes passed the load
        if self.delete_share and watcher is not None and self._aimed < AIMED_AT_ONCE:
            self._aimed += 1
            ctx.later(0.0, "delete", (op.value["post_id"], watcher))
        elif rnd.random() < self.delete_share:
            at_once = rnd.random() < AT_ONCE_SHARE
            ctx.later(0.0 if at_once else rnd.uniform(0, w.window), "delete", (op.value["post_id"], watcher))

    def delete(self, ctx: Context, a: Arrival) -> None:
        post_id, watcher = a.data
        op = ctx.driver.delete(post_id, process=f"deleter-{post_id}", intended_time=ctx.intended(a.t))
        if op.type == OK and watcher is not None:
            # a follower looks one and three windows on (past a stated --delete-lag): a delete late within its
            # window is gone by then, a lost one still shows, and how long after says which it is
            settle = self.run.rules().delete_lag
            for windows in LOOKS_AFTER_DELETE:
                ctx.later(settle + windows * self.work.window, "look-after-delete", watcher)

    def look_after_delete(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.read(a.data, 20, process="delete-looker", intended_time=ctx.intended(a.t))

    def watch(self, ctx: Context, a: Arrival) -> None:
        w = self.work
        post_id, watcher, since, interval = a.data
        op = ctx.driver.read(watcher, 20, process=f"watch:{post_id}", intended_time=ctx.intended(a.t))
        seen = op.type == OK and any(i["post_id"] == post_id for i in op.value["items"])
        if not seen and time.time() - since < self.watch_windows * w.window:
            # polls thin out (1.25x) so a long wait costs few reads; a lag is known within 25%
            ctx.later(interval, "watch", (post_id, watcher, since, min(interval * 1.25, w.window / 2)))

    def unfollow(self, ctx: Context, a: Arrival) -> None:
        d, rnd, w = ctx.driver, ctx.random, self.work
        _, following = self._graph_index()
        user = w.user(rnd.randrange(w.population))
        mine = following.get(user, [])
        if mine:
            # aimed: an author on the unfollower's first page, whose posts a read right after can show (a random
            # followee with posts was pushed off that page by newer ones, and a feed that ignored the unfollow
            # showed nothing wrong in 396 reads under a busy CI host); else one with posts
            page = d.read(user, 20, process=f"churn-{a.data}", intended_time=ctx.intended(a.t))
            items = (page.value or {}).get("items") or () if page.type == OK else ()
            shown = {str(i.get("author_id")) for i in items} - {user}
            picks = [mine[rnd.randrange(len(mine))] for _ in range(20)]
            followee = next((f for f in mine if f in shown), None) or next((f for f in picks if f in self._posted),
                                                                            picks[0])
            op = d.unfollow(user, followee, process=f"churn-{a.data}", intended_time=ctx.intended(a.t))
            look, refollow = unfollow_followups(w.window, self.run.rules().unfollow_lag)
            ctx.later(refollow, "refollow", (user, followee))
            if op.type == OK:  # the unfollower looks at their feed before the refollow
                ctx.later(look, "read-after-unfollow", user)

    def heavy_read(self, ctx: Context, a: Arrival) -> None:
        user = self.heavy_reader()
        op = ctx.driver.read(user, 20, process="heavy-reader", intended_time=ctx.intended(a.t))
        if op.type == OK and op.value.get("next_cursor") is not None:
            ctx.driver.read(user, 20, op.value["next_cursor"], process="heavy-reader")

    def heavy_delete(self, ctx: Context, a: Arrival) -> None:
        if a.data < len(self._heavy_posts):  # each arrival its own post: no two processes delete one
            ctx.driver.delete(self._heavy_posts[-1 - a.data], process="heavy-deleter", intended_time=ctx.intended(a.t))

    def read_after_unfollow(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.read(a.data, 20, process="churn-reader", intended_time=ctx.intended(a.t))

    def refollow(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.follow(*a.data, process="churn-refollow", intended_time=ctx.intended(a.t))

    # -- the verdict: the case's report module judges; the scenario says what it observed ---------------------

    def observed(self) -> FeedObserved:
        return FeedObserved(self.work, self.watch_windows, self.samples, self.above, len(self._graph()),
                            getattr(self, "graph_seconds", 0.0), getattr(self, "preload_seconds", 0.0),
                            max(100, round(self.work.population * PRELOAD_PER_USER)), g2_judged=self.g2_judged)

    def judge(self, history: History) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
        return judge_feed(history, self.observed(), self.fault_checks, rules=self.run.rules())

    def fault_checks(self, history: History, analysis: FeedAnalysis, lags: list[dict[str, Any]],
                     t0: float) -> list[CheckResult]:
        return []


@scenario
class FeedSlowConsumer(FeedPeak):
    name = f"{CASE.name}-slow-consumer"
    description = "Case F fault: the fan-out consumers at a share of the write work (the seed's 1,000 of 1,247.71)"
    delete_share = 0.0  # a delete drops its post's pending writes: the backlog arithmetic would not hold
    g2_judged = False  # G2 is meant to break here: shown, not judged (peakproof.cases.feed.report)
    watch_windows = 30.0  # the drift grows past the window: keep watching (polls thin out)

    def configure_fault(self, d: Any) -> None:
        share = float(self.spec.opt("consumer_share") or self.work.seed_slowed[1]["share_of_write_work"])
        self.slow = self.work.slowed(share)
        seed_row = min(self.work.seed_slowed, key=lambda b: abs(b["share_of_write_work"] - share))
        self.fault = {"consumer share of write work": round(share, 4),
                      "slowed consumer (writes/s)": round(self.slow["rate"], 2),
                      "seed row": f"{seed_row['consumer_rate']:,} writes/s -> G2 breached after "
                                  f"{seed_row['g2_breached_after_s']:.2f} s at full scale",
                      "predicted breach at this scale (s)": round(self.slow["g2_breached_after_s"], 2)}
        if self.reference:  # a fault op of the nemesis: drawn on every chart of the report
            nemesis.inject(d.history, "slow_consumer", lambda: d.admin(rate=self.slow["rate"]) is not None,
                           rate=round(self.slow["rate"], 2), share=round(share, 4))

    def fault_checks(self, history: History, analysis: FeedAnalysis, lags: list[dict[str, Any]],
                     t0: float) -> list[CheckResult]:
        """Not a pass/fail of the target: how the measured breach compares with the arithmetic."""
        w = self.work  # self.slow: set by configure_fault, reference target or not
        return [g2_breach_matches_backlog_arithmetic(
            history, lags, self.samples, self._graph_index()[0], t0=t0, seconds=self.seconds, window=w.window,
            threshold=w.threshold, rate=self.slow["rate"], predicted=self.slow["g2_breached_after_s"],
            slowed=self.reference)]


@scenario
class FeedShardDown(FeedPeak):
    name = f"{CASE.name}-shard-down"
    description = "Case F fault: inbox shard 0 down for the whole run; its users read by fan-in"

    def configure_fault(self, d: Any) -> None:
        self.fault = {"shards down": [0]}
        if self.reference:  # a fault op of the nemesis: drawn on every chart of the report
            nemesis.inject(d.history, "shard_down", lambda: d.admin(shards_down=[0]) is not None, shard=0)

    def fault_checks(self, history: History, analysis: FeedAnalysis, lags: list[dict[str, Any]],
                     t0: float) -> list[CheckResult]:
        return [shard_down_feeds_correct_and_not_empty(analysis)]




def load_graph(sc: Scenario, d: Any, pairs: list[tuple[str, str]]) -> None:
    """The scenario's graph on the target: in bulk (``add_follows``) where the driver can; else one
    follow at a time, 32 at once, for a small graph, or for any graph once the user has said their
    service has no bulk loading (``--without bulk_graph``); else INCONCLUSIVE naming the scale that fits."""
    import gevent.pool

    if sc.has(d, "bulk_graph"):
        d.add_follows(pairs)
        return
    unfit = graph_unfit(len(pairs), sc.spec.number_scale, sc.waived("bulk_graph"))
    if unfit:
        from peakproof.capabilities import CapabilityMissing

        raise CapabilityMissing(sc.run.case.capability("bulk_graph"), unfit, driver=f"the driver {sc.spec.driver}")
    if len(pairs) > SMALL_GRAPH:
        print(f"feed: loading the graph one follow at a time (--without bulk_graph): {len(pairs):,} follows, "
              f"32 at once", flush=True)
    pool = gevent.pool.Pool(32)
    for u, f in pairs:
        pool.spawn(d.follow, u, f, process="graph")
    pool.join()
    bad = [op for op in d.history.ops if op.f == "follow" and op.process == "graph" and op.type != OK]
    if bad:
        sc.off_contract(bad[0])
        raise SetupFailed(f"{len(bad)} of {len(pairs)} follows of the graph failed on {sc.host}: {bad[0]!r}")


@scenario
class FeedCalibrate(Calibration):
    """What this machine offers on the peak's commonest request: a first page of a small graph's user."""

    name = f"{CASE.name}-calibrate"
    case = CASE.name
    description = "Calibration: rising rates of first-page reads until arrivals go out late or slow"
    latency_limit = 0.2  # G1
    USERS, FOLLOWS, POSTS = 200, 20, 400

    def peak_rate(self) -> float:
        return 4 * seed_peak_per_s()  # the peak mix plus churn and watchers, with room to measure above it

    def setup(self) -> dict[str, Any]:
        import random

        run = "cal" + uuid.uuid4().hex[:6]
        rnd = random.Random(self.spec.seed)
        users = [f"{run}-u{i}" for i in range(self.USERS)]
        d = self.driver()
        load_graph(self, d, [(u, f) for u in users for f in rnd.sample(users, self.FOLLOWS) if f != u])
        for i in range(self.POSTS):
            d.publish(users[i % len(users)], f"calibration post {i}", process="setup")
        bad = [op for op in d.history.ops if op.type != OK]
        if bad:
            self.off_contract(bad[0])
            raise SetupFailed(f"{len(bad)} setup writes failed on {self.host}: {bad[0]!r}")
        return {"users": users}

    def adopt(self, shared: dict[str, Any]) -> None:
        self.users = shared["users"]

    def probe(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.read(self.users[a.data[1] % len(self.users)], 20, process="probe", intended_time=ctx.intended(a.t))
