"""The ``peakproof`` command: ``serve`` a reference target, ``run`` the main job."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from typing import Any

from .case import CASES
from .errors import PeakproofError, UsageError


def _auto_or(kind: type) -> object:
    positive = _positive(kind)

    def parse(text: str) -> object:
        return "auto" if text == "auto" else positive(text)  # type: ignore[operator]

    return parse


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}; got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a value > 0; got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="peakproof", description="Prove system designs keep their promises at peak load.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{serve,run,plan,models}")

    s = sub.add_parser("serve", help="serve a reference target or the provider simulator (127.0.0.1 by default)")
    s.add_argument("case", choices=[*CASES, "providers"], help="what to serve")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=_positive(int), default=8000)
    s.add_argument("--policy", default=None,
                   help="tickets: pessimistic (default) | optimistic | none; "
                        "notifications: cascade (default) | single | parallel; feed: hybrid (default) | push | pull")
    s.add_argument("--hold-seconds", type=_positive(float), default=120.0,
                   help="tickets: reservation window when PUT /quotas gives none (BS4: 120)")
    s.add_argument("--lease-seconds", type=_positive(float), default=2.0, help="tickets: lock lease length")
    s.add_argument("--admin-token", default=os.environ.get("PEAKPROOF_ADMIN_TOKEN"),
                   help="tickets, feed: require 'Authorization: Bearer TOKEN' on PUT /quotas, POST /admin/graph "
                        "(env PEAKPROOF_ADMIN_TOKEN)")
    s.add_argument("--db", default=os.environ.get("PEAKPROOF_DB"),
                   help="SQLite file (default .peakproof/CASE.sqlite3); data survives a restart on the same file")
    s.add_argument("--durability", choices=["normal", "full"], default="normal",
                   help="tickets, feed: normal survives a process crash; full also survives power loss (an fsync a "
                        "commit)")
    s.add_argument("--threads", type=_positive(int), default=32, help="worker threads (tickets: row work; "
                                                                       "notifications: bulkheads in all)")
    s.add_argument("--provider-url", default=os.environ.get("PEAKPROOF_PROVIDER_URL"),
                   help="notifications: base URL of the providers (e.g. peakproof serve providers)")
    s.add_argument("--backoff", type=_positive(float), default=30.0, help="notifications: s between rounds (BI9)")
    s.add_argument("--call-timeout", type=_positive(float), default=2.0, help="notifications: provider call timeout")
    s.add_argument("--breaker-cool-down", type=_positive(float), default=10.0, help="notifications: s a breaker "
                                                                                    "stays open before a probe")
    s.add_argument("--breaker-window", type=_positive(int), default=200,
                   help="notifications: a channel's breaker looks at its last N calls")
    s.add_argument("--breaker-failures", type=_positive(int), default=24,
                   help="notifications: transient failures in that window that open the breaker")
    s.add_argument("--no-dispatch", dest="dispatch", action="store_false",
                   help="notifications: accept only, deliver nothing (to benchmark the accept path alone)")
    s.add_argument("--http", choices=["lean", "uvicorn"], default=os.environ.get("PEAKPROOF_HTTP", "lean"),
                   help="the reference targets' HTTP server: lean (default; targets/_lean.py: httptools, "
                        "pipelining answered in order, less plumbing per request) or uvicorn [env PEAKPROOF_HTTP]")
    s.add_argument("--commit", choices=["group", "each"], default="group",
                   help="notifications: 'group' commits accepted writes in batches (one transaction each, "
                        "answered once durable; reads from memory); 'each' one transaction per write (the old path)")
    s.add_argument("--budget", type=_positive(int), default=3, help="notifications: provider calls per notification "
                                                                     "(BI8)")
    s.add_argument("--threshold", type=int, default=None,
                   help="feed: followers above which posts are merged at read time (default: the seed's rule at "
                        "full scale, window x spare capacity = 169,691)")
    s.add_argument("--inbox-cap", type=_positive(int), default=400, help="feed: inbox entries kept per user (VH6)")
    s.add_argument("--shards", type=_positive(int), default=4, help="feed: inbox shards (by user id)")
    s.add_argument("--consumers", type=_positive(int), default=4, help="feed: fan-out consumer threads")
    s.add_argument("--fanout-rate", type=_positive(float), default=None,
                   help="feed: inbox writes/s the consumers may do in all (default unbounded; the seed sizes it at "
                        "3x the steady fan-out)")
    s.add_argument("--max-backlog", type=_positive(int), default=None,
                   help="feed: fan-out queue capacity in inbox writes; a publish beyond it gets 429 + Retry-After")
    s.add_argument("--window", type=_positive(float), default=60.0,
                   help="feed: the G2 window, s; a publish whose fan-out would take longer is flagged degraded")
    s.add_argument("--multiplier", type=float, default=1.0, help="providers: failure-rate multiplier")
    s.add_argument("--down", nargs="*", default=[], choices=["push", "sms", "email"], help="providers: channels down")
    s.add_argument("--ack-lost", type=float, default=0.0, help="providers: share of calls delivered, answer lost")
    s.add_argument("--latency", type=float, default=0.0, help="providers: s each call takes")
    s.add_argument("--seed", type=int, default=20260730, help="providers: failure draws")

    r = sub.add_parser("run", help="check a target end to end: properties, the open-model load scenario, a verdict "
                                   "and an HTML report",
                       epilog="Exit codes: 0 PASS (every check and service level decided and held), 1 FAIL (the "
                              "target broke a promise), 2 INCONCLUSIVE (the harness could not decide: its generator "
                              "fell behind the curve, a check had no chance to fail, a stage raised).")
    r.add_argument("case", nargs="?", default="tickets", choices=list(CASES))
    r.add_argument("--target-url", default=os.environ.get("PEAKPROOF_TARGET_URL"),
                   help="base URL of the case's API (e.g. http://127.0.0.1:8000/tickets); default: start the "
                        "reference target on 127.0.0.1")
    r.add_argument("--admin-token", default=os.environ.get("PEAKPROOF_ADMIN_TOKEN"))
    r.add_argument("--policy", default=None,
                   help="policy of the reference target started when no --target-url is given (tickets: "
                        "pessimistic | optimistic | none; notifications: cascade | single | parallel)")
    r.add_argument("--scale", type=_auto_or(float), default="auto",
                   help="the load's rate as a share of the seed's peak (feed: the share of its 1,000,000 users), or "
                        "'auto' (default): measure what this machine's generator offers first and run at the largest "
                        "scale that fits with headroom (tickets: scale 1 is 20,000 reservations/s; notifications: "
                        "1,736.11/s); an explicit scale the machine cannot offer comes out INCONCLUSIVE, not FAIL")
    r.add_argument("--processes", type=_auto_or(int), default=1,
                   help="generator processes (Locust --processes); 'auto': one per core of this machine")
    r.add_argument("--slo", action="append", default=None,
                   help="service level for the load, OP:STAT<=LIMIT[@intended|@send] or errors:rate<=N%% "
                        "(repeatable; default: the seed's, and an error budget of 0.1%%)")
    r.add_argument("--duration", type=_positive(float), default=30.0,
                   help="notifications, feed: seconds of peak arrivals (the seed's peak minute is 60)")
    r.add_argument("--provider-url", default=os.environ.get("PEAKPROOF_PROVIDER_URL"),
                   help="notifications: the providers' base URL (default: start the simulator)")
    from .cases.notifications.checks import DeliveryRules

    for flag, name, kind, text in DeliveryRules.OPTIONS:  # the target's rules: served so, judged so, reported
        r.add_argument(flag, dest=name, type=_positive(kind) if name != "answer_timeout" else kind, default=None,
                       help=f"notifications: {text}")
    r.add_argument("--faults", action="store_true",
                   help="also run the fault scenarios (notifications: push down, ack lost, reminder flood; feed: "
                        "slowed fan-out consumer, inbox shard down)")
    r.add_argument("--time-scale", type=_auto_or(float), default=None,
                   help="compress the case's time by this: tickets and notifications (default 24) divide the 120 s "
                        "hold window and the 30 s backoff; feed (default 100: the seed's full peak rates on the scaled graph) multiplies the rates and divides the "
                        "60 s G2 window (the seed's threshold and backlog arithmetic keep); feed: 'auto' fits it to "
                        "this machine like --scale auto")
    r.add_argument("--report-dir", default="reports")
    r.add_argument("--skip-properties", action="store_true", help="only the load scenario and the in-process opening")
    r.add_argument("--skip-load", action="store_true", help="only the properties (no calibration, no load)")
    pl = sub.add_parser("plan", help="measure this machine's generator and print how many processes/machines the "
                                     "seed's full peak needs, with the commands to run it")
    pl.add_argument("case", nargs="?", default="tickets", choices=list(CASES))
    pl.add_argument("--target-url", default=os.environ.get("PEAKPROOF_TARGET_URL"),
                    help="the target to plan for (its answer time sizes the pool); default: the embedded reference")
    pl.add_argument("--provider-url", default=os.environ.get("PEAKPROOF_PROVIDER_URL"),
                    help="notifications: the providers' base URL (default: start the simulator)")
    pl.add_argument("--admin-token", default=os.environ.get("PEAKPROOF_ADMIN_TOKEN"))
    pl.add_argument("--pool-size", type=_positive(int), default=1000, help="in-flight requests per process")
    _add_models_parser(sub)
    return p


def _add_models_parser(sub: Any) -> None:
    """``peakproof models [case] [--param value ...] [--json]``: options from each Params dataclass."""
    from dataclasses import MISSING, fields

    from .models import PARAMS

    m = sub.add_parser("models", help="print the seeds' models (ported, exact), with your own assumptions")
    m.add_argument("--json", action="store_true", help="every figure as JSON instead of tables")
    cases = m.add_subparsers(dest="case", metavar="{tickets,notifications,feed}")
    for name, cls in PARAMS.items():
        c = cases.add_parser(name, help=f"the {name} models")
        c.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="every figure as JSON instead of tables")
        for f in fields(cls):
            default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
            flag = "--" + f.name.replace("_", "-")
            help_text = f"{f.metadata.get('help', '')} (default: {default})"
            if isinstance(default, list):
                c.add_argument(flag, dest=f.name, nargs="+", type=type(default[0]), default=None, help=help_text)
            else:
                c.add_argument(flag, dest=f.name, type=type(default), default=None, help=help_text)


def _run_models(args: argparse.Namespace) -> int:
    import json
    from dataclasses import fields

    from .models import CASES, PARAMS

    names = [args.case] if args.case else list(CASES)
    results = {}
    for name in names:
        cls = PARAMS[name]
        given = {f.name: getattr(args, f.name) for f in fields(cls) if getattr(args, f.name, None) is not None}
        try:
            params = cls(**given)
            results[name] = CASES[name].compute(params)
        except (ValueError, IndexError, KeyError, ZeroDivisionError) as e:
            raise UsageError(f"peakproof models {name}", "assumptions the model can run with",
                             given, f"The model said: {type(e).__name__}: {e}.") from None
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[names[0]], indent=1, default=str))
    else:
        print("\n\n".join(CASES[name].render(r) for name, r in results.items()))
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        return _serve_case(args)
    except ValueError as e:  # a policy or option the target refused
        raise UsageError(f"peakproof serve {args.case}", "options the target accepts", vars(args).get("policy"),
                         str(e)) from None


def _serve_case(args: argparse.Namespace) -> int:
    db = Path(args.db or f".peakproof/{args.case}.sqlite3")
    where = f"http://{args.host}:{args.port}"
    if args.case in CASES:
        case = CASES[args.case]
        policy = args.policy or case.default_policy
        print(f"peakproof: serving {case.name} (policy {policy}) on {where}{case.path} (db {db})", file=sys.stderr,
              flush=True)
        case.serve(args, db, policy)
        return 0
    from targets._lean import serve_asgi

    from .providers import ProviderConfig, ProviderSim, provider_app

    sim = ProviderSim(ProviderConfig(multiplier=args.multiplier, down=tuple(args.down), ack_lost=args.ack_lost,
                                     latency=args.latency, seed=args.seed))
    print(f"peakproof: serving providers (push, sms, email) on {where}", file=sys.stderr, flush=True)
    serve_asgi(provider_app(sim), args.host, args.port, args.http)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "models":
            return _run_models(args)
        if args.command == "plan":
            from .plan import plan_command

            return plan_command(args)
        from .runner import run

        case = CASES[args.case]
        if args.time_scale is None:
            args.time_scale = "auto" if case.scale_axis == "time_scale" else case.default_time_scale
        if args.time_scale == "auto" and case.scale_axis != "time_scale":
            raise UsageError("--time-scale", "a number for this case (only the feed fits its time scale to the "
                             "machine)", "auto", f"Use --scale auto; {case.name}'s default time scale is "
                                                 f"{case.default_time_scale:g}.")
        if args.processes == "auto":
            args.processes = os.cpu_count() or 1
        return run(args)
    except PeakproofError as e:
        print(f"peakproof: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
