"""One record per case: what every entry point (``peakproof run``, ``serve``, the launcher,
the calibration) reads, so the cases cannot drift apart in per-case ``if`` chains.

A :class:`Case` says how the case's reference target is served, which scenarios replay its
peak (and its faults), what its peak rate is at the seed's full scale, how ``--scale`` and
``--time-scale`` default, and what the case needs beside its target (the provider
simulator for notifications).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class Case:
    name: str
    path: str  # where the reference target serves the case's API, e.g. "/tickets"
    title: str
    policies: tuple[str, ...]  # the first is the seed's choice (the default)
    scenarios: tuple[str, ...]  # the peak
    faults: tuple[str, ...] = ()  # run with --faults
    calibration: str = ""  # the Locust scenario that measures what this machine offers
    default_scale: float = 0.1  # used when no calibration can run
    max_auto_scale: float = 1.0
    default_time_scale: float = 24.0
    # A share of the calibrated capacity the load may use. The calibration probes the case's
    # cheapest request for half a second a step; the scenario mixes heavier ones for longer.
    headroom: float = 0.5
    needs_providers: bool = False
    fresh_target_per_scenario: bool = False  # a load run leaves a big state behind (the feed's graph)
    scenario_scale: dict[str, float] = field(default_factory=dict)  # a fault's scale as a share of --scale
    served_options: Callable[[argparse.Namespace], dict[str, object]] = lambda args: {}
    load_args: Callable[[argparse.Namespace], list[str]] = lambda args: []
    property_args: Callable[[argparse.Namespace], list[str]] = lambda args: []
    scale_axis: str = "scale"  # what --scale auto adjusts: "scale" (rate and size) or "time_scale" (feed)
    peak_rate: Callable[[], float] = lambda: 0.0  # the seed's full peak, arrivals/s
    # a stage that needs no server (the reference target only): (name, results, detail)
    in_process_stage: Callable[[argparse.Namespace], tuple[str, list[Any], str]] | None = None
    # ``peakproof serve CASE``: serve the reference target until interrupted (args, db, policy)
    serve: Callable[[argparse.Namespace, Path, str], None] = lambda args, db, policy: None

    @property
    def default_policy(self) -> str:
        return self.policies[0]

    def all_scenarios(self, faults: bool) -> tuple[str, ...]:
        return self.scenarios + (self.faults if faults else ())


def _notifications_rules(args: argparse.Namespace) -> dict[str, object]:
    """The target's delivery rules for this run: as given, else the seed's with its 30 s rounds and
    10 s cool-down shrunk like the scenario's time (what the embedded reference is served with)."""
    ts = args.time_scale or 24.0
    given = {k: getattr(args, k, None) for k in ("budget", "backoff", "breaker_window", "breaker_min_failures",
                                                   "breaker_cool_down", "answer_timeout")}
    defaults = {"backoff": 30.0 / ts, "breaker_cool_down": max(1.0, 10.0 / ts)}
    return {k: v if v is not None else defaults.get(k) for k, v in given.items()}


def _rules_flags(args: argparse.Namespace) -> list[str]:
    flags = {"budget": "--budget", "backoff": "--backoff", "breaker_window": "--breaker-window",
             "breaker_min_failures": "--breaker-failures", "breaker_cool_down": "--breaker-cool-down",
             "answer_timeout": "--answer-timeout"}
    return [x for k, v in _notifications_rules(args).items() if v is not None for x in (flags[k], str(v))]


def _notifications_served(args: argparse.Namespace) -> dict[str, object]:
    r = _notifications_rules(args)
    return {"provider_url": args.provider_url, "backoff": r["backoff"], "breaker_cool_down": r["breaker_cool_down"],
            "budget": r["budget"], "breaker_window": r["breaker_window"],
            "breaker_failures": r["breaker_min_failures"], "call_timeout": r["answer_timeout"]}


def _with_duration(args: argparse.Namespace) -> list[str]:
    return ["--duration", str(args.duration)]


def _notifications_load(args: argparse.Namespace) -> list[str]:
    return ["--provider-url", args.provider_url, "--duration", str(args.duration), *_rules_flags(args)]


def _notifications_properties(args: argparse.Namespace) -> list[str]:
    return (["--provider-url", args.provider_url] if args.provider_url else []) + _rules_flags(args)


def _tickets_seed_opening(args: argparse.Namespace) -> tuple[str, list[Any], str]:
    """The seed's full opening (200,000 requests, 5,000 quota) in process, in virtual time."""
    from .cases.tickets import InProcessTickets, OpeningWorkload, check_tickets, replay_opening

    driver = InProcessTickets(policy=args.policy or "pessimistic")
    quota, history = replay_opening(driver, OpeningWorkload())
    # The opening alone (no window phase): it judges the promises of the opening; the load
    # scenario judges all six, retries, late payments and returns included.
    judged = [r for r in check_tickets(history, driver.tolerance) if r.name in OPENING_PROMISES]
    return ("seed-scale opening in process (200,000 requests, 5,000 quota; " + ", ".join(OPENING_PROMISES) + ")",
            judged, f"quota-row lock taken {driver.core.lock_acquisitions(quota):,} times")


OPENING_PROMISES = ("no_oversell", "no_valid_rejection", "stock_is_conserved")


def _serve_tickets(args: argparse.Namespace, db: Path, policy: str) -> None:
    from targets.tickets.server import serve

    serve(args.host, args.port, db, policy=policy, admin_token=args.admin_token, hold_seconds=args.hold_seconds,
          lease_seconds=args.lease_seconds, threads=args.threads, durability=args.durability, http=args.http)


def _serve_notifications(args: argparse.Namespace, db: Path, policy: str) -> None:
    from targets.notifications.server import serve

    from .errors import UsageError

    if not args.provider_url:
        raise UsageError("--provider-url", "the providers' base URL", None,
                         "Start them with 'peakproof serve providers --port 8001' and pass "
                         "--provider-url http://127.0.0.1:8001.")
    serve(args.host, args.port, db, args.provider_url, policy=policy, backoff=args.backoff, workers=args.threads,
          call_timeout=args.call_timeout, breaker_cool_down=args.breaker_cool_down, budget=args.budget,
          breaker_window=args.breaker_window, breaker_failures=args.breaker_failures, commit=args.commit,
          durability=args.durability, dispatch=args.dispatch, http=args.http)


def feed_seed_threshold() -> int:
    """The hybrid threshold at the seed's full scale, computed by the ported model (169,691)."""
    from .models.feed import compute

    return int(compute()["hybrid"]["threshold"])


def _serve_feed(args: argparse.Namespace, db: Path, policy: str) -> None:
    from targets.feed.server import serve

    threshold = feed_seed_threshold() if args.threshold is None else args.threshold
    serve(args.host, args.port, db, policy=policy, threshold=threshold, inbox_cap=args.inbox_cap,
          shards=args.shards, consumers=args.consumers, rate=args.fanout_rate, max_backlog=args.max_backlog,
          admin_token=args.admin_token, window=args.window, durability=args.durability, http=args.http)


def _feed_peak() -> float:
    from .models.feed import compute

    h = compute()["fan_out_models"]
    return float(h["peak_feed_requests_per_s"] + h["peak_posts_per_s"])


CASES: dict[str, Case] = {
    "tickets": Case(
        "tickets", "/tickets", "Case T: the ticket opening", ("pessimistic", "optimistic", "none"),
        ("tickets-opening",), ("tickets-lease-faults",), calibration="tickets-calibrate", default_scale=0.15,
        default_time_scale=24.0, scenario_scale={"tickets-lease-faults": 0.5},  # every decision takes the lock
        peak_rate=lambda: 20_000.0, in_process_stage=_tickets_seed_opening, serve=_serve_tickets),
    "notifications": Case(
        "notifications", "/notifications", "Case N: notifications at peak", ("cascade", "single", "parallel"),
        ("notifications-peak",),
        ("notifications-push-down", "notifications-ack-lost", "notifications-reminder-flood"),
        calibration="notifications-calibrate", default_scale=0.2, default_time_scale=24.0, headroom=0.4,
        needs_providers=True, peak_rate=lambda: 1736.11, serve=_serve_notifications,
        # faults cost the target more per notification (timeouts held; 3x the arrivals in a flood)
        scenario_scale={"notifications-push-down": 0.5, "notifications-ack-lost": 0.5,
                        "notifications-reminder-flood": 0.25},
        served_options=_notifications_served, load_args=_notifications_load, property_args=_notifications_properties),
    "feed": Case(
        "feed", "/feed", "Case F: the news feed at peak", ("hybrid", "push", "pull"),
        ("feed-peak",), ("feed-slow-consumer", "feed-shard-down"), calibration="feed-calibrate",
        default_scale=0.01, max_auto_scale=0.01, default_time_scale=100.0, fresh_target_per_scenario=True,
        load_args=_with_duration, scale_axis="time_scale", peak_rate=_feed_peak, serve=_serve_feed),
}


def get_case(name: str) -> Case:
    from .errors import UsageError

    if name not in CASES:
        raise UsageError("case", "one of " + ", ".join(CASES), name)
    return CASES[name]
