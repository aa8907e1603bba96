"""The ``peakproof`` command: ``serve`` a reference target, ``run`` the main job."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from typing import Any

from .errors import PeakproofError, UsageError


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
    sub = p.add_subparsers(dest="command", required=True, metavar="{serve,run,models}")

    s = sub.add_parser("serve", help="serve a reference target over HTTP (127.0.0.1 by default)")
    s.add_argument("case", choices=["tickets"], help="which reference target")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=_positive(int), default=8000)
    s.add_argument("--policy", choices=["pessimistic", "optimistic", "none"], default="pessimistic",
                   help="locking discipline on the quota row (default: the seed's chosen pessimistic lease lock)")
    s.add_argument("--hold-seconds", type=_positive(float), default=120.0,
                   help="reservation window when PUT /quotas gives none (BS4: 120)")
    s.add_argument("--lease-seconds", type=_positive(float), default=2.0, help="lock lease length")
    s.add_argument("--admin-token", default=os.environ.get("PEAKPROOF_ADMIN_TOKEN"),
                   help="require 'Authorization: Bearer TOKEN' on PUT /quotas (env PEAKPROOF_ADMIN_TOKEN)")
    s.add_argument("--db", default=os.environ.get("PEAKPROOF_DB", ".peakproof/tickets.sqlite3"),
                   help="SQLite file; sales survive a restart on the same file (env PEAKPROOF_DB)")
    s.add_argument("--durability", choices=["normal", "full"], default="normal",
                   help="normal survives a process crash; full also survives power loss (an fsync a commit)")
    s.add_argument("--threads", type=_positive(int), default=32, help="worker threads for quota-row work")

    r = sub.add_parser("run", help="check a target end to end: properties, the open-model load scenario, a verdict "
                                   "and an HTML report")
    r.add_argument("case", nargs="?", default="tickets", choices=["tickets"])
    r.add_argument("--target-url", default=os.environ.get("PEAKPROOF_TARGET_URL"),
                   help="base URL of the case's API (e.g. http://127.0.0.1:8000/tickets); default: start the "
                        "reference target on 127.0.0.1")
    r.add_argument("--admin-token", default=os.environ.get("PEAKPROOF_ADMIN_TOKEN"))
    r.add_argument("--policy", choices=["pessimistic", "optimistic", "none"], default="pessimistic",
                   help="policy of the reference target started when no --target-url is given")
    r.add_argument("--scale", type=_positive(float), default=0.15,
                   help="rate and quota of the load scenario as a share of the seed's (0.15: 3,000 req/s on a "
                        "750 quota, what one Locust process sustains beside the reference target on 2 cores)")
    r.add_argument("--time-scale", type=_positive(float), default=24.0,
                   help="divide the 120 s hold window by this (24: a 5 s window)")
    r.add_argument("--report-dir", default="reports")
    r.add_argument("--skip-properties", action="store_true", help="only the load scenario and the in-process opening")
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            from targets.tickets.server import serve

            print(f"peakproof: serving {args.case} (policy {args.policy}) on http://{args.host}:{args.port}/tickets "
                  f"(db {args.db})", file=sys.stderr, flush=True)
            serve(args.host, args.port, Path(args.db), policy=args.policy, admin_token=args.admin_token,
                  hold_seconds=args.hold_seconds, lease_seconds=args.lease_seconds, threads=args.threads,
                  durability=args.durability)
            return 0
        if args.command == "models":
            return _run_models(args)
        from .runner import run

        return run(args)
    except PeakproofError as e:
        print(f"peakproof: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
