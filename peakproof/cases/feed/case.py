"""Case F's record: how the news feed's peak is served, replayed and judged (see :class:`peakproof.case.Case`)."""

from __future__ import annotations

import argparse
from functools import lru_cache
from pathlib import Path
from typing import Any

from peakproof.capabilities import Capability
from peakproof.case import Case
from peakproof.design import Statement, design_options, stated_design
from peakproof.options import LOAD, LOCUST, PYTEST, RUN, SERVE, Option, non_negative, positive
from peakproof.spec import RunSpec
from .rules import TIES, OrderRules

# The case's name: its scenarios and fixtures are named from it (a copy of this folder renames it here).
NAME = "feed"

_RULES = frozenset({RUN, LOCUST, PYTEST})


def follow_brings(text: str) -> "str | int":
    """``--follow-brings``: all, nothing, or a number N (the followee's last N earlier posts)."""
    if text in ("all", "nothing"):
        return text
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"expected all, nothing or a number of posts (the last N); got {text!r}") from None
    if n < 0:
        raise ValueError(f"expected a number of posts of 0 or more; got {n}")
    return n


def lag_seconds(text: str) -> float:
    v = float(text)
    if not 0 <= v <= 3600:
        raise ValueError(f"expected seconds from 0 to 3600; got {text!r}")
    return v


# Where a product may differ from the seed's design by choice (peakproof.design). None leaves a check out: each
# changes what a read must show, and every check judges by it (a read within a stated lag of a write is not held
# to that write; a post the follow did not bring in is not expected).
DESIGN = (
    Statement("unfollow_lag", "applies an unfollow up to {value} s after it answers (a worker takes the author's "
                              "posts out of the timeline)", (), "",
              ("unfollowed_authors_never_shown", "feed_matches_pull_model"), kind=lag_seconds, metavar="S"),
    Statement("delete_lag", "takes a deleted post out of its followers' timelines up to {value} s after the delete "
                            "answers (a worker does it)", (), "",
              ("deleted_posts_never_shown", "feed_matches_pull_model"), kind=lag_seconds, metavar="S"),
    Statement("fanout_lag", "puts a post in its followers' timelines up to {value} s after the publish answers (an "
                            "asynchronous fan-out worker; the seed's 60 s window is still judged)", (), "",
              ("feed_matches_pull_model", "pages_do_not_skip_or_repeat"), kind=lag_seconds, metavar="S"),
    Statement("follow_brings", "brings {value} of a followee's earlier posts into the follower's timeline on a "
                               "follow (all, nothing, or the last N)", (), "",
              ("feed_matches_pull_model", "posts_visible_within_window", "pages_do_not_skip_or_repeat"),
              kind=follow_brings, metavar="all|nothing|N"),
    # a reader who "unfollows" themselves still sees their own posts: unstated, that FAILs unfollowed_authors_never_shown,
    # and the hint named only --unfollow-lag, which does not explain it
    Statement("own_posts", "shows the reader's own posts in their home timeline", (), "",
              ("feed_matches_pull_model", "unfollowed_authors_never_shown")),
)


def rules_of(spec: RunSpec, driver: type | None = None) -> OrderRules:
    """How the target's times and ties read, as stated (the contract's where not), and what its stated design
    (:data:`DESIGN`: the options over the driver's ``design``) makes a read show."""
    from dataclasses import replace

    rules = OrderRules.from_options(spec.opt)
    design = stated_design(DESIGN, {s.name: spec.opt(s.name) for s in DESIGN}, driver)
    return replace(rules, **dict(design.stated)) if design.stated else rules


@lru_cache(maxsize=1)
def _model() -> dict:
    from peakproof.models.feed import compute

    return compute()


def seed_threshold() -> int:
    """The hybrid threshold at the seed's full scale, computed by the ported model (169,691)."""
    return int(_model()["hybrid"]["threshold"])


def peak_rate() -> float:
    """Feed reads plus posts per second at the seed's full scale (1,000,000 users), from the ported model."""
    h = _model()["fan_out_models"]
    return float(h["peak_feed_requests_per_s"] + h["peak_posts_per_s"])


def serve(args: argparse.Namespace, db: Path, policy: str) -> None:
    from peakproof.targets.feed.server import serve as serve_feed

    threshold = seed_threshold() if args.threshold is None else args.threshold
    serve_feed(args.host, args.port, db, policy=policy, threshold=threshold, inbox_cap=args.inbox_cap,
               shards=args.shards, consumers=args.consumers, rate=args.fanout_rate, max_backlog=args.max_backlog,
               admin_token=args.admin_token, window=args.window, durability=args.durability, http=args.http)


CAPABILITIES = (
    Capability("bulk_graph", "bulk loading of the social graph", ("add_follows",), (),
               "the graph is loaded one follow at a time (only a small graph: at most 25,000 follows)"),
    Capability("stats", "the target's own counters: its fan-out backlog", ("stats",),
               ("g2_breach_matches_backlog_arithmetic",),
               "the run cannot wait for fan-out to drain, nor chart the backlog"),
    Capability("faults", "fan-out fault hooks: the consumers' rate, a shard down", ("admin",),
               ("g2_breach_matches_backlog_arithmetic", "shard_down_feeds_correct_and_not_empty"),
               "the fault scenarios cannot put their faults in"),
    Capability("inbox_size", "inboxes: each feed read reports the reader's inbox size (a design that merges "
                             "on read has none)", (), ("inbox_capped",)),
)
_SERVE = frozenset({SERVE})

OPTIONS = (
    Option("time_precision", OrderRules.OPTIONS[0][3], _RULES, kind=non_negative(float), flag="--time-precision"),
    Option("ties", OrderRules.OPTIONS[1][3], _RULES, choices=TIES, flag="--ties"),
    *design_options(DESIGN, _RULES),
    Option("consumer_share", "feed-slow-consumer: the consumers' rate as a share of the write work (default the "
                             "seed's 1,000 of 1,247.71 writes/s)", LOAD, kind=positive(float)),
    Option("threshold", "followers above which posts are merged at read time (default: the seed's rule at full "
                        "scale, window x spare capacity = 169,691)", _SERVE, kind=int, env="-"),
    Option("inbox_cap", "inbox entries kept per user (VH6)", _SERVE, default=400, kind=positive(int), env="-"),
    Option("shards", "inbox shards (by user id)", _SERVE, default=4, kind=positive(int), env="-"),
    Option("consumers", "fan-out consumer threads", _SERVE, default=4, kind=positive(int), env="-"),
    Option("fanout_rate", "inbox writes/s the consumers may do in all (default unbounded; the seed sizes it at 3x "
                          "the steady fan-out)", _SERVE, kind=positive(float), env="-"),
    Option("max_backlog", "fan-out queue capacity in inbox writes; a publish beyond it gets 429 + Retry-After",
           _SERVE, kind=positive(int), env="-"),
    Option("window", "the G2 window, s; a publish whose fan-out would take longer is flagged degraded", _SERVE,
           default=60.0, kind=positive(float), env="-"),
    Option("durability", "normal survives a process crash; full also survives power loss (an fsync a commit)",
           _SERVE, default="normal", choices=("normal", "full"), env="-"),
)

def contract_app(work: Path) -> tuple[Any, dict[str, str], Any]:
    """The reference's ASGI app for the contract stage in process (its database in ``work``)."""
    from peakproof.targets.feed.server import build_app

    app = build_app(work / "contract-feed.sqlite3", admin_token="contract")
    return app, {"Authorization": "Bearer contract"}, app.on_shutdown


CASE = Case(
    NAME, "/feed", "Case F: the news feed at peak", __name__.rpartition(".")[0], ("hybrid", "push", "pull"),
    (f"{NAME}-peak",), (f"{NAME}-slow-consumer", f"{NAME}-shard-down"), calibration=f"{NAME}-calibrate",
    peak_rate=peak_rate,
    default_scale=0.01, max_auto_scale=0.01, default_time_scale=100.0, default_duration=30.0,
    fresh_target_per_scenario=True, scale_axis="time_scale", options=OPTIONS, serve=serve,
    latency_checks=("posts_visible_within_window",), rules=rules_of,
    model="peakproof.models.feed", rank=2, model_params="FeedParams", capabilities=CAPABILITIES,
    contract_app=contract_app, design=DESIGN)
