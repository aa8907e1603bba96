"""Case N's record: how the notifications peak is served, replayed and judged (see :class:`peakproof.case.Case`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from peakproof.capabilities import Capability
from peakproof.design import Statement, design_options
from peakproof.case import Case
from peakproof.options import PLAN, PYTEST, RUN, LOCUST, SERVE, TARGET, Option, non_negative, positive
from peakproof.spec import RunSpec
from .analysis import CASCADES, service_channels
from .checks import DeliveryRules

# The case's name: its scenarios and fixtures are named from it (a copy of this folder renames it here).
NAME = "notifications"

_RULES = frozenset({RUN, LOCUST, PYTEST, SERVE})


def peak_rate() -> float:
    """Notifications/s at the seed's peak (BI1-BI3), from the ported model: 1,736.11."""
    from peakproof.models.notifications import NotificationsParams, scale

    return float(scale(NotificationsParams())["peak_per_s"])


# s: the shortest cool-down a shrunk run serves the reference with. A skip is judged from when the target
# could have heard the failures and decided (0.5 s) until the cool-down could be over (a quarter early, less
# 0.25 s): with 1 s nothing was left to judge; with 4 s, 2.25 s of every opening are.
COOL_DOWN_FLOOR = 4.0


def resolve(spec: RunSpec) -> RunSpec:
    """The target's rounds and cool-down as given, else the seed's 30 s and 10 s shrunk like the
    scenario's time (the cool-down no shorter than :data:`COOL_DOWN_FLOOR`): what the embedded
    reference is served with and what every stage judges by."""
    ts = spec.number_time_scale
    return spec.with_case_options(backoff=spec.opt("backoff", 30.0 / ts),
                                  breaker_cool_down=spec.opt("breaker_cool_down", max(COOL_DOWN_FLOOR, 10.0 / ts)))


def rules_of(spec: RunSpec, driver: type | None = None) -> DeliveryRules:
    """The delivery rules as stated (the seed's where not), with the design statements that change a check's
    judgement (no idempotency key: one delivery per request the client made) from the options or the driver."""
    from dataclasses import fields, replace

    from peakproof.design import stated_design

    rules = DeliveryRules.from_options(spec.opt)
    judged = {f.name for f in fields(DeliveryRules)}
    stated = stated_design(DESIGN, {s.name: spec.opt(s.name) for s in DESIGN}, driver).stated
    return replace(rules, **{k: v for k, v in stated.items() if k in judged})


def served_options(spec: RunSpec) -> dict[str, object]:
    return {"provider_url": spec.opt("provider_url"),
            **{name: spec.opt(name) for _, name, _, _ in DeliveryRules.OPTIONS}}


def light_options() -> dict[str, object]:
    # delivery off: nothing is ever sent to this address (the plan measures the accept path's generator)
    return {"provider_url": "http://127.0.0.1:9", "extra": ["--no-dispatch"]}


def serve(args: argparse.Namespace, db: Path, policy: str) -> None:
    from peakproof.targets.notifications.server import serve as serve_notifications

    from peakproof.errors import UsageError

    if not args.provider_url:
        raise UsageError("--provider-url", "the providers' base URL", None,
                         "Start them with 'peakproof serve providers --port 8001' and pass "
                         "--provider-url http://127.0.0.1:8001.")
    r = DeliveryRules.from_options(lambda name: getattr(args, name, None))  # the seed's where not given
    serve_notifications(args.host, args.port, db, args.provider_url, policy=policy, backoff=r.backoff,
                        workers=args.threads, call_timeout=r.answer_timeout, breaker_cool_down=r.breaker_cool_down,
                        budget=r.budget, breaker_window=r.breaker_window, breaker_failures=r.breaker_min_failures,
                        commit=args.commit, durability=args.durability, dispatch=args.dispatch, http=args.http)


_RECORD_CHECKS = ("one_delivery_per_event", "delivery_ratio_at_least", "attempt_budget_respected",
                  "no_retry_after_permanent_on_same_channel", "breaker_counts_only_transient", "preference_respected",
                  "status_matches_providers", "formatting_within_channel_limits",
                  "urgent_overtakes_reminder_backlog", "urgent_first_outside_a_backlog", "answers_belong_to_who_asked")
CAPABILITIES = (
    Capability("setup", "set-up: register a recipient's channels and addresses", ("put_recipient",),
               _RECORD_CHECKS + ("status_moves_forward",), "no scenario and no property can run"),
    Capability("providers_record", "the providers' record: every call the target made to push, SMS and e-mail "
                                   "(the simulator's GET /calls at --provider-url, or the driver's provider_calls)",
               ("provider_calls",), _RECORD_CHECKS, option="provider_url"),
    Capability("stats", "the target's own counters: its circuit breakers' transitions", ("breakers",), (),
               "the report has no breaker chart (nothing is left undecided)"),
)


# Where a product may differ from the seed's design by choice (peakproof.design)
DESIGN = (
    Statement("no_breaker", "has no circuit breaker: it calls a failing channel as its rounds say, however often "
                            "that channel failed",
              ("breaker_opens_when_due", "breaker_counts_only_transient"),
              "both judge when a channel's breaker opens and what it counts; a service without one has neither"),
    Statement("no_priority", "has no priority between urgent notifications and reminders: one queue, taken in "
                             "arrival order",
              ("urgent_overtakes_reminder_backlog", "urgent_first_outside_a_backlog"),
              "both judge urgent notifications going ahead of reminders; in one queue nothing goes ahead "
              "(the urgent mean latency is still judged: it is the seed's promise to the user)"),
    Statement("cascade", "cascades a notification to another channel: {value} (after-any: after any failure, the "
                         "seed's; after-permanent: only after a dead address; none: one channel per notification)",
              (), "", ("delivery_ratio_at_least", "preference_respected", "breaker_opens_when_due",
                       "attempt_budget_respected", "no_retry_after_permanent_on_same_channel"),
              choices=CASCADES, metavar="after-any|after-permanent|none", example="none"),
    Statement("channels", "has these channels only: {value} (a recipient's preference for another is met on their "
                          "next choice it has)", (), "",
              ("preference_respected", "delivery_ratio_at_least", "attempt_budget_respected",
               "no_retry_after_permanent_on_same_channel", "status_matches_providers"),
              kind=service_channels, metavar="sms,email"),
    Statement("no_idempotency_key", "has no idempotency key: each notify its client sends is a notification of "
                                    "its own (a replayed one is sent again)", (), "",
              ("one_delivery_per_event",)),
)


def driver_options(spec: RunSpec) -> dict[str, object]:
    return {"provider_url": spec.opt("provider_url")}


def _rule(flag: str, name: str, kind: type, text: str) -> Option:
    parse = non_negative(kind) if name == "answer_timeout" else positive(kind)
    aliases = ("--call-timeout",) if name == "answer_timeout" else ()
    more = " (default: the seed's 30 s / --time-scale)" if name == "backoff" else ""
    return Option(name, text + more, _RULES, kind=parse, flag=flag, aliases=aliases)


OPTIONS = (
    Option("provider_url", "the providers' base URL your target delivers through; their GET /calls record is the "
                           "ground truth (default under peakproof run: start the simulator)",
           TARGET | {SERVE, PLAN}, web_ui=True),
    *(_rule(*o) for o in DeliveryRules.OPTIONS),
    *(Option(name, text, frozenset({RUN, LOCUST, PYTEST}), action="store_true", flag=flag)
      for flag, name, text in DeliveryRules.SWITCHES),
    *design_options(DESIGN, _RULES - {SERVE}),
    Option("threads", "provider calls in flight in all (the bulkheads' sizes, shared by the seed's call rates)", frozenset({SERVE}), default=32, kind=positive(int), env="-"),
    Option("dispatch", "accept only, deliver nothing (to benchmark the accept path alone)", frozenset({SERVE}),
           default=True, action="store_false", flag="--no-dispatch", env="-"),
    Option("commit", "'group' commits accepted writes in batches (answered once durable); 'each' one transaction "
                     "a write", frozenset({SERVE}), default="group", choices=("group", "each"), env="-"),
    Option("durability", "normal survives a process crash; full also survives power loss (an fsync a commit)",
           frozenset({SERVE}), default="normal", choices=("normal", "full"), env="-"),
)

def contract_app(work: Path) -> tuple[Any, dict[str, str], Any]:
    """The reference's ASGI app for the contract stage in process: it accepts and answers; no
    dispatcher (no provider to deliver to: delivery is the properties' business)."""
    from peakproof.targets.notifications.server import build_app

    app = build_app(work / "contract-notifications.sqlite3", "http://127.0.0.1:9", dispatch=False)
    return app, {}, app.on_shutdown


CASE = Case(
    NAME, "/notifications", "Case N: notifications at peak", __name__.rpartition(".")[0],
    ("cascade", "single", "parallel"), (f"{NAME}-peak",),
    (f"{NAME}-push-down", f"{NAME}-ack-lost", f"{NAME}-reminder-flood"),
    calibration=f"{NAME}-calibrate", peak_rate=peak_rate, default_scale=0.2, default_time_scale=24.0,
    default_duration=30.0, headroom=0.4, needs_providers=True, latency_checks=("urgent mean delivery latency",),
    # faults cost the target more per notification (timeouts held; 3x the arrivals in a flood)
    scenario_scale={"notifications-push-down": 0.5, "notifications-ack-lost": 0.5,
                    "notifications-reminder-flood": 0.25},
    options=OPTIONS, resolve=resolve, rules=rules_of, served_options=served_options, light_options=light_options, serve=serve,
    model="peakproof.models.notifications", rank=1, model_params="NotificationsParams", capabilities=CAPABILITIES,
    driver_options=driver_options, contract_app=contract_app, design=DESIGN)
