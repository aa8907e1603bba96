"""The ``peakproof`` command: ``run`` the main job, ``serve`` a reference target, ``plan``, ``models``.

Every option comes from :mod:`peakproof.options` (declared once) and every case from the
registry (:func:`peakproof.cases.all_cases`): this module names neither.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .cases import all_cases, all_options, get_case, run_of
from .errors import PeakproofError, UsageError
from .options import PLAN, RUN, SERVE, SHARED, Option, add_options

_PROVIDER_OPTIONS = (  # the provider simulator is not a case: its own few options
    Option("multiplier", "failure-rate multiplier", frozenset({SERVE}), default=1.0, kind=float, env="-"),
    Option("down", "channels down", frozenset({SERVE}), default=[], choices=("push", "sms", "email"), nargs="*",
           env="-"),
    Option("ack_lost", "share of calls delivered whose answer is lost", frozenset({SERVE}), default=0.0, kind=float,
           env="-"),
    Option("latency", "s each call takes", frozenset({SERVE}), default=0.0, kind=float, env="-"),
    Option("seed", "seed of the failure draws", frozenset({SERVE}), default=20260730, kind=int, env="-"),
)
_SERVE_SHARED = ("host", "port", "db", "http")


USAGE_EXIT = 4  # a usage error: its own code (pytest's for its own), apart from INCONCLUSIVE's 2


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit code (argparse's 2 is INCONCLUSIVE's)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(USAGE_EXIT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    cases = all_cases()
    p = Parser(prog="peakproof", description="Prove system designs keep their promises at peak load.",
               epilog="Exit codes: 0 PASS, 1 FAIL, 2 INCONCLUSIVE, 4 usage error.")
    from . import __version__

    p.add_argument("--version", action="version", version=f"peakproof {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{run,serve,plan,models,driver,init,locustfile}",
                           parser_class=Parser)

    r = sub.add_parser("run", help="check a target end to end: properties, the open-model load scenario, a verdict "
                                   "and an HTML report",
                       epilog="Exit codes: 0 PASS (every check and service level decided and held), 1 FAIL (the "
                              "target broke a promise), 2 INCONCLUSIVE (the harness could not decide: its generator "
                              "fell behind the curve, a check had no chance to fail, a stage raised), 4 usage error.")
    r.add_argument("case", nargs="?", default=next(iter(cases)), choices=list(cases))
    add_options(r, RUN, all_options())

    s = sub.add_parser("serve", help="serve a reference target or the provider simulator (127.0.0.1 by default)")
    what = s.add_subparsers(dest="case", required=True, metavar="{" + ",".join([*cases, "providers"]) + "}")
    for name, case in cases.items():
        c = what.add_parser(name, help=f"the reference {name} target ({case.title})")
        c.add_argument("--policy", default=None, choices=list(case.policies),
                       help=f"the design served (default {case.default_policy}, the seed's choice)")
        add_options(c, SERVE, [o for o in SHARED if o.name != "policy"] + list(case.options))
    prov = what.add_parser("providers", help="the push / SMS / e-mail provider simulator")
    add_options(prov, SERVE, [o for o in SHARED if o.name in _SERVE_SHARED] + list(_PROVIDER_OPTIONS))

    pl = sub.add_parser("plan", help="measure this machine's generator and print how many processes/machines the "
                                     "seed's full peak needs, with the commands to run it")
    pl.add_argument("case", nargs="?", default=next(iter(cases)), choices=list(cases))
    add_options(pl, PLAN, all_options())
    _add_models_parser(sub, cases)
    _add_driver_parser(sub, cases)
    i = sub.add_parser("init", help="write into your repository a driver skeleton and the CI jobs (GitHub Actions, "
                                    "GitLab CI) that run CASE's properties on every push and its load on a "
                                    "schedule against $STAGING_URL")
    i.add_argument("case", choices=list(cases))
    i.add_argument("--dir", default=".", help="the repository's folder (default: the current one)")
    lf = sub.add_parser("locustfile", help="print where the Locust scenarios are (the installed package's, or "
                                           "./loadtests/): locust -f \"$(peakproof locustfile)\" ...")
    lf.add_argument("case", nargs="?", choices=list(cases), help="print that case's file instead of the folder")
    rp = sub.add_parser("replay", help="replay a FAIL's witness (reports/*.replay.json) against a target, on fresh "
                                       "ids, with its timing; exit 1 when the check fails again")
    rp.add_argument("file", help="the .replay.json a FAILed run wrote beside its report")
    from .replay_cli import add_arguments

    add_arguments(rp)
    return p


def _init(args: argparse.Namespace) -> int:
    from .scaffold import ci_commands, init, skeleton_class

    case = get_case(args.case)
    where = Path(args.dir)
    if not where.is_dir():
        raise UsageError("--dir", "an existing folder (your repository)", str(where), "Create it first.")
    for path in init(case, where):
        print(f"peakproof: wrote {path}")
    props, load = ci_commands(case)
    print(f"Next: set STAGING_URL (and STAGING_ADMIN_TOKEN if your service asks for one) in your CI's variables. "
          f"If your service does not speak the {case.name} contract, fill in peakproof_driver.py, try it with "
          f"peakproof driver check {case.name} --driver peakproof_driver.py:{skeleton_class(case)} --target-url URL, "
          f"and set PEAKPROOF_DRIVER=peakproof_driver.py:{skeleton_class(case)}. GitLab: a repository with its own "
          f".gitlab-ci.yml adds 'include: [{{local: peakproof.gitlab-ci.yml}}]' to it; the load job runs from a "
          f"pipeline schedule. The jobs' commands, to try by hand:")
    for job in (props, load):
        print(f"  {job.name} ({'every push' if job.trigger == 'push' else 'on a schedule'}):")
        for command in job.commands:
            print(f"    {command}")
    return 0


def _locustfile(args: argparse.Namespace) -> int:
    from .case import shipped_file

    if args.case:
        print(get_case(args.case).loadtest_file())
    else:
        print(shipped_file("loadtests", "tickets.py").parent)
    return 0


def _add_driver_parser(sub: Any, cases: dict[str, Any]) -> None:
    """``peakproof driver new CASE`` and ``peakproof driver check CASE --driver X --target-url U``."""
    from .cases import option

    d = sub.add_parser("driver", help="write a driver for your own API (new), and try it against your service "
                                      "(check) before a run (docs/drivers.md)")
    what = d.add_subparsers(dest="action", required=True, metavar="{new,check,docs}", parser_class=Parser)
    new = what.add_parser("new", help="print a commented driver skeleton for CASE")
    new.add_argument("case", choices=list(cases))
    new.add_argument("--output", "-o", default=None, help="write it to this file (refused if it exists)")
    docs = what.add_parser("docs", help="print the table of CASE's operations (docs/drivers.md's, generated from "
                                        "the case's one table and its protocol)")
    docs.add_argument("case", nargs="*", metavar="CASE", help=f"any of {', '.join(cases)} (default: every case)")
    docs.add_argument("--write", default=None, metavar="FILE",
                      help="rewrite the generated tables of FILE (docs/drivers.md) in place instead of printing")
    chk = what.add_parser("check", help="call each operation and capability once against --target-url and print "
                                        "what came back and how the harness classified it",
                          epilog="Exit codes: 0 every call answered as the harness needs, 1 one did not, "
                                 "4 usage error.")
    chk.add_argument("case", choices=list(cases))
    shared = [option(n) for n in ("target_url", "admin_token", "token", "driver", "without", "request_timeout")]
    own: dict[str, Any] = {}  # the cases' own run options (the same command line as peakproof run's works here)
    for c in cases.values():
        for o in c.options:
            if RUN in o.surfaces:
                own.setdefault(o.name, o)
    add_options(chk, RUN, shared + list(own.values()))


def _driver_command(args: argparse.Namespace) -> int:
    from .drivertool import operations_doc, run_check, skeleton, update_docs

    if args.action == "docs":
        # an unknown name is a usage error naming the cases there are
        cases = [get_case(n) for n in args.case] if args.case else list(all_cases().values())
        if not args.write:
            print("\n\n".join(operations_doc(c) for c in cases))
            return 0
        try:
            changed = update_docs(args.write, cases)
        except (OSError, ValueError) as e:
            raise UsageError("--write", "a markdown file with a generated region per case", args.write, str(e))
        print(f"peakproof: {args.write}: " + (f"rewrote the tables of {', '.join(changed)}" if changed else
                                              "every table already current"), file=sys.stderr)
        return 0
    if args.action == "new":
        text = skeleton(get_case(args.case))
        if args.output:
            out = Path(args.output)
            if out.exists():
                raise UsageError("--output", "a file that does not exist yet", str(out), "Pick another name.")
            out.write_text(text, encoding="utf-8")
            print(f"peakproof: wrote {out}; fill in the TODOs, then: peakproof driver check {args.case} "
                  f"--driver {out}:My{args.case.title()} --target-url URL", file=sys.stderr)
        else:
            print(text, end="")
        return 0
    case = get_case(args.case)
    if not args.target_url:
        raise UsageError("--target-url", "your service's base URL", None, "driver check calls it.")
    spec = case.resolved(case.spec_from(lambda name: getattr(args, name, None)))
    return run_check(run_of(spec))


def _add_models_parser(sub: Any, cases: dict[str, Any]) -> None:
    """``peakproof models [case] [--param value ...] [--json]``: options from each case's Params dataclass."""
    from dataclasses import MISSING, fields

    m = sub.add_parser("models", help="print the seeds' models (ported, exact), with your own assumptions")
    m.add_argument("--json", action="store_true", help="every figure as JSON instead of tables")
    modelled = {n: c for n, c in cases.items() if c.model}
    sm = m.add_subparsers(dest="case", metavar="{" + ",".join(modelled) + "}")
    for name, case in modelled.items():
        cls = getattr(case.model_module(), case.model_params)
        c = sm.add_parser(name, help=f"the {name} models")
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

    modelled = {n: c for n, c in all_cases().items() if c.model}
    names = [args.case] if args.case else list(modelled)
    results, modules = {}, {}
    for name in names:
        module = modelled[name].model_module()
        cls = getattr(module, modelled[name].model_params)
        given = {f.name: getattr(args, f.name) for f in fields(cls) if getattr(args, f.name, None) is not None}
        try:
            params = cls(**given)
            results[name], modules[name] = module.compute(params), module
        except (ValueError, IndexError, KeyError, ZeroDivisionError) as e:
            raise UsageError(f"peakproof models {name}", "assumptions the model can run with",
                             given, f"The model said: {type(e).__name__}: {e}.") from None
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[names[0]], indent=1, default=str))
    else:
        print("\n\n".join(modules[name].render(r) for name, r in results.items()))
    return 0


def _serve(args: argparse.Namespace) -> int:
    db = Path(args.db or f".peakproof/{args.case}.sqlite3")
    where = f"http://{args.host}:{args.port}"
    if args.case == "providers":
        from peakproof.targets._lean import serve_asgi

        from .providers import ProviderConfig, ProviderSim, provider_app

        sim = ProviderSim(ProviderConfig(multiplier=args.multiplier, down=tuple(args.down), ack_lost=args.ack_lost,
                                         latency=args.latency, seed=args.seed))
        print(f"peakproof: serving providers (push, sms, email) on {where}", file=sys.stderr, flush=True)
        serve_asgi(provider_app(sim), args.host, args.port, args.http)
        return 0
    case = get_case(args.case)
    policy = args.policy or case.default_policy
    print(f"peakproof: serving {case.name} (policy {policy}) on {where}{case.path} (db {db})", file=sys.stderr,
          flush=True)
    try:
        case.serve(args, db, policy)
    except ValueError as e:  # a policy or option the target refused
        raise UsageError(f"peakproof serve {args.case}", "options the target accepts", policy, str(e)) from None
    return 0


def run_spec(args: argparse.Namespace) -> Any:
    """``peakproof run``'s command line, parsed once into the run's spec."""

    case = get_case(args.case)
    processes = args.processes
    if processes == "auto":  # every core generates, but one is left to a target on this machine
        from .placement import auto_processes, usable_cores
        from .placement import on_loopback

        processes = auto_processes(usable_cores(), not args.target_url or on_loopback(args.target_url))
    spec = case.spec_from(lambda name: getattr(args, name, None), processes=processes)
    return case.resolved(spec, calibrates=True)


def _witness_file(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError("peakproof replay FILE", "a witness file (JSON) a FAILed run wrote in its report folder",
                         path, f"It could not be read: {e}.") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "serve":
            return _serve(args)
        if args.command == "models":
            return _run_models(args)
        if args.command == "driver":
            return _driver_command(args)
        if args.command == "init":
            return _init(args)
        if args.command == "locustfile":
            return _locustfile(args)
        if args.command == "replay":
            from .replay_cli import replay_command

            return replay_command(_witness_file(args.file), args)
        if args.command == "plan":
            from .plan import plan_command

            return plan_command(args, get_case(args.case))
        from .runner import run

        # the process's run record, built once: a driver that cannot be loaded is said before any stage starts
        return run(run_of(run_spec(args)))
    except UsageError as e:  # the user's to fix: its own code, never mistaken for INCONCLUSIVE
        print(f"peakproof: {e}", file=sys.stderr)
        return USAGE_EXIT
    except PeakproofError as e:
        print(f"peakproof: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
