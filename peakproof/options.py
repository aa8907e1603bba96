"""Every option of peakproof, declared once, as data.

An :class:`Option` has one name (its ``dest``), one flag, one default, one environment
variable (``PEAKPROOF_<NAME>``) and one help text. :func:`add_options` puts the options of a
*surface* on a parser: ``run`` (``peakproof run``), ``plan``, ``serve`` (``peakproof serve
CASE``), ``locust`` (``locust -f loadtests/``) and ``pytest`` (``pytest properties/``). The
three parsers a user meets for one run (run, locust, pytest) therefore agree by construction
(``tests/served/test_options.py`` compares them). A case adds its own options in its
:class:`~peakproof.case.Case` record; nothing here names a case.

No Locust import: the pytest and ``peakproof`` processes read this module too.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .errors import UsageError

RUN, PLAN, SERVE, LOCUST, PYTEST = "run", "plan", "serve", "locust", "pytest"
LOAD = frozenset({RUN, LOCUST})  # what shapes a load run: the same on both
TARGET = frozenset({RUN, PLAN, LOCUST, PYTEST})  # what names the target and how to reach it


def positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {'whole number' if kind is int else 'number'}; "
                                             f"got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a value > 0; got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def non_negative(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected a value >= 0; got {text!r}")
        return value

    parse.__name__ = f"non-negative {kind.__name__}"
    return parse


def auto_or(kind: type) -> Callable[[str], Any]:
    number = positive(kind)

    def parse(text: str) -> Any:
        return "auto" if text == "auto" else number(text)

    parse.__name__ = f"'auto' or a positive {kind.__name__}"
    return parse


@dataclass(frozen=True)
class Option:
    """One option: its name is its ``dest`` and the spec's field; ``surfaces`` say where it appears."""

    name: str
    help: str
    surfaces: frozenset[str]
    default: Any = None
    kind: Callable[[str], Any] | None = None  # parses the text (and the environment variable's)
    choices: tuple[Any, ...] | None = None
    action: str = "store"  # or "store_true", "store_false", "append"
    flag: str = ""  # default: --name-with-dashes
    aliases: tuple[str, ...] = ()
    env: str = ""  # default: PEAKPROOF_NAME ("-" for none)
    secret: bool = False
    web_ui: bool = False  # shown in the start form of Locust's web UI
    metavar: str | None = None
    nargs: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-").rstrip("-")

    @property
    def env_var(self) -> str | None:
        if self.env == "-":
            return None
        return self.env or "PEAKPROOF_" + self.name.upper()

    def default_value(self, environ: dict[str, str] | None = None) -> Any:
        """The default, or the environment variable's value (parsed here, with a clear error)."""
        environ = os.environ if environ is None else environ
        text = environ.get(self.env_var) if self.env_var else None
        if text is None or text == "":
            return list(self.default) if self.action == "append" and self.default else self.default
        if self.action in ("store_true", "store_false"):
            truthy = text.strip().lower() in ("1", "true", "yes", "on")
            return truthy if self.action == "store_true" else not truthy
        try:
            value = self.kind(text) if self.kind else text
        except (argparse.ArgumentTypeError, ValueError) as e:
            raise UsageError(f"environment variable {self.env_var}", f"what {self.cli_flag} takes ({e})", text,
                             f"Fix or unset {self.env_var}.") from None
        if self.choices and value not in self.choices:
            raise UsageError(f"environment variable {self.env_var}", "one of " + ", ".join(map(str, self.choices)),
                             text, f"Fix or unset {self.env_var}.")
        return [value] if self.action == "append" else value

    def help_text(self) -> str:
        env = f" [env {self.env_var}]" if self.env_var else ""
        default = "" if self.default in (None, False, (), []) or "default" in self.help else f" (default: {self.default})"
        return (self.help + default + env).replace("%", "%%")

    def kwargs(self, environ: dict[str, str] | None = None) -> dict[str, Any]:
        kw: dict[str, Any] = {"dest": self.name, "help": self.help_text(), "default": self.default_value(environ)}
        if self.action in ("store_true", "store_false"):
            kw["action"] = self.action
        else:
            kw["action"] = self.action
            if self.kind is not None:
                kw["type"] = self.kind
            if self.choices is not None:
                kw["choices"] = list(self.choices)
            if self.metavar:
                kw["metavar"] = self.metavar
            if self.nargs is not None:
                kw["nargs"] = self.nargs
        return kw


def for_surface(options: Iterable[Option], surface: str) -> list[Option]:
    """The options that appear on ``surface``, once each (a case may re-declare a shared name: first wins)."""
    seen: dict[str, Option] = {}
    for o in options:
        if surface in o.surfaces and o.name not in seen:
            seen[o.name] = o
    return list(seen.values())


def add_options(parser: Any, surface: str, options: Iterable[Option],
                environ: dict[str, str] | None = None) -> list[Option]:
    """Add ``options`` of ``surface`` to an argparse parser or group, a Locust (configargparse) group,
    or a pytest option group (``addoption``). Returns what was added. Every option of every case:
    :func:`peakproof.cases.all_options` (this module is below the registry and reads none)."""
    chosen = for_surface(options, surface)
    add = getattr(parser, "addoption", None) or parser.add_argument
    for o in chosen:
        action = add(o.cli_flag, *o.aliases, **o.kwargs(environ))
        if surface == LOCUST and action is not None:  # Locust's web UI reads these marks
            action.include_in_web_ui = o.web_ui
            action.is_secret, action.is_required, action.is_multiple = o.secret, False, False
    return chosen


_TARGET_URL_HELP = ("the target's base URL (e.g. http://127.0.0.1:8000/tickets); every stage goes there and "
                    "nothing runs in process. Default: the embedded reference target")

SHARED: tuple[Option, ...] = (
    # -- the target -------------------------------------------------------------------------------------------
    Option("target_url", _TARGET_URL_HELP, TARGET),
    Option("admin_token", "token for the target's admin calls (set-up, faults), and for every call when the driver "
                          "authenticates every call and no --token is given (Authorization: Bearer TOKEN, or the "
                          "driver's auth_headers)", TARGET | {SERVE}, secret=True, web_ui=True),
    Option("token", "token for the target's ordinary calls (a buyer's), for a driver that authenticates every call "
                    "(auth = 'every'; docs/drivers.md); default: --admin-token", TARGET - {SERVE}, secret=True),
    Option("target_process", "a process of the target that discovery cannot see (it finds the listening socket's owner "
                             "and what it talks to over loopback TCP and Unix sockets: a database, a broker and its "
                             "workers): a PID, or a regular expression searched in each process's name and command "
                             "line (repeatable). Its CPU is then the target's, not a neighbour's",
           frozenset({RUN, LOCUST, PYTEST}), action="append", metavar="PATTERN|PID"),
    Option("target_cgroup", "the target's cgroup (a container's processes), e.g. /system.slice/docker-ID.scope or "
                            "the same under /sys/fs/cgroup: every process in it is the target's",
           frozenset({RUN, LOCUST, PYTEST}), metavar="PATH"),
    Option("driver", "your own driver for your own API: module:Class or path/to/driver.py:Class (see "
                     "docs/drivers.md; peakproof driver new CASE writes one to start from)",
           frozenset({RUN, PLAN, LOCUST, PYTEST})),
    Option("openapi", "the OpenAPI (URL or file) the contract stage (Schemathesis) checks the target against. "
                      "Default: the case's own contract; with --driver your API's, or the stage is skipped",
           frozenset({RUN, PYTEST}), metavar="URL|FILE"),
    Option("strict_contract", "every contract finding FAILs, also the notes: answers that break no promise of the "
                              "design (a stricter parser than the contract's, ids PostgreSQL cannot store; or a request "
                              "outside the contract accepted, ST201, on a bound no promise of the design states)",
           frozenset({RUN, PYTEST}), action="store_true"),
    Option("without", "a capability your service does not have (e.g. stats, inbox_size): the checks it feeds are "
                      "waived, and listed as such in the verdict (repeatable)",
           frozenset({RUN, LOCUST, PYTEST}), action="append", metavar="CAPABILITY"),
    Option("policy", "the embedded reference target's design (the case's first policy is the seed's choice); "
                     "ignored with --target-url", frozenset({RUN, PYTEST, SERVE})),
    # -- the load -----------------------------------------------------------------------------------------------
    Option("scenario", "which scenario to run (required with locust): see the list an unknown name prints",
           frozenset({LOCUST}), default="", web_ui=True),
    Option("scale", "multiply the curve's rate and the case's size; 'auto': peakproof run measures this machine "
                    "first (locust alone: the case's default scale)", LOAD, default="auto", kind=auto_or(float),
           web_ui=True),
    Option("time_scale", "compress the case's time by this (tickets, notifications: divide the 120 s hold and 30 s "
                         "backoff; feed: multiply the rates, divide the 60 s window); default: the case's "
                         "(tickets, notifications 24; feed 100, 'auto' under peakproof run)", LOAD,
           kind=auto_or(float), web_ui=True),
    Option("duration", "seconds of peak arrivals of constant-rate scenarios (default: the case's)", LOAD,
           kind=positive(float), web_ui=True),
    Option("processes", "generator processes on this machine (Locust --processes); 'auto': the machine's cores",
           frozenset({RUN}), default=1, kind=auto_or(int)),
    Option("faults", "also run the case's fault scenarios", frozenset({RUN}), action="store_true"),
    Option("slo", "service level OP:STAT<=LIMIT[@intended|@send] or errors:rate<=N% (repeatable; default: the "
                  "scenario's, and an error budget of 0.1%)", LOAD, action="append", metavar="SLO"),
    Option("spacing", "how arrivals are spaced inside the curve", LOAD, default="uniform",
           choices=("uniform", "poisson")),
    Option("seed", "seed of every random choice of the workload", LOAD, default=20260730, kind=int),
    Option("pool_size", "requests in flight at most, per generator process", LOAD | {PLAN}, default=1000,
           kind=positive(int)),
    Option("connections", "HTTP connections per process at most (opened only as needed); fewer makes requests "
                          "wait for one, timed as latency", LOAD, default=1000, kind=positive(int)),
    Option("source_address", "the local address this process's requests leave from (e.g. 127.0.0.3)", LOAD),
    Option("request_timeout", "s before a request's outcome is unknown (info)", LOAD, default=5.0,
           kind=positive(float)),
    Option("max_lateness", "an arrival not sent this many s after its instant is dropped (and counted)", LOAD,
           default=2.0, kind=positive(float)),
    Option("late_threshold", "an arrival sent more than this many s after its instant is late", LOAD, default=0.1,
           kind=positive(float)),
    Option("offered_tolerance", "the share of the curve the run may fall short by", LOAD, default=0.02,
           kind=non_negative(float)),
    Option("max_run_seconds", "hard bound on a load run, whatever the scenario says", LOAD, default=900.0,
           kind=positive(float)),
    Option("save_history", "also write the merged history (one JSON op a line) beside the report", LOAD,
           action="store_true"),
    Option("report_dir", "where the HTML reports go (and a FAIL's witness files: peakproof replay reads them)",
           LOAD | {PYTEST}, default="reports", web_ui=True),
    Option("replay_seconds", "after a FAIL, s in all to replay each violated check's witness on fresh ids and shrink "
                             "it (0: show the witness as found, send nothing)", LOAD | {PYTEST}, default=60.0,
           kind=non_negative(float)),
    Option("stop_at_first", "over a URL, end a property at its first broken promise (quicker); by default, once a "
                            "check is found broken, the property goes on and judges every other promise on its own",
           frozenset({RUN, PYTEST}), action="store_true"),
    Option("max_wait", "s one wait a property plans may take at most (a hold's lapse, a breaker's moment): a "
                       "property that would wait longer for the target is left out and says so (its checks "
                       "INCONCLUSIVE), never a hang; if your product waits that long by design, state it "
                       "(--holds-never-lapse) or raise this", frozenset({RUN, PYTEST}), default=300.0,
           kind=positive(float)),
    Option("junit", "also write the verdict as JUnit XML to this file, for a CI system's test report: a test case "
                    "per check and service level per stage; a broken promise a failure (Actual / Limit), an "
                    "undecided one skipped with its reason", LOAD, metavar="FILE"),
    Option("calibrated_rate", "on-time arrivals/s one generator process offered in a calibration (peakproof run "
                              "measures it; give it to skip the measuring, e.g. from peakproof plan); named in "
                              "the verdict when the generator falls behind",
           frozenset({LOCUST, RUN}), kind=positive(float)),
    Option("calibrate_max_rate", "calibration scenarios: the top step's arrivals/s (default: the case's peak); on "
                                 "peakproof run, the calibration never climbs above it",
           frozenset({LOCUST, RUN}), kind=positive(float)),
    Option("calibrate_min_rate", "calibration scenarios: the first step's arrivals/s (default: 2% of the case's "
                                 "peak); on peakproof run, the first ladder's first step",
           frozenset({LOCUST, RUN}), kind=positive(float)),
    Option("calibrate_latency", "calibration scenarios: a step passes only if the target also answered in time",
           frozenset({LOCUST}), action="store_true"),
    # -- the run itself ------------------------------------------------------------------------------------------
    Option("skip_properties", "only the load (and the in-process stage)", frozenset({RUN}), action="store_true"),
    Option("skip_load", "only the properties (no calibration, no load)", frozenset({RUN}), action="store_true"),
    # -- serving a reference target (peakproof serve CASE) ----------------------------------------------------------
    Option("host", "the address to serve on", frozenset({SERVE}), default="127.0.0.1", env="-"),
    Option("port", "the port to serve on", frozenset({SERVE}), default=8000, kind=positive(int), env="-"),
    Option("db", "SQLite file (default .peakproof/CASE.sqlite3); data survives a restart on the same file",
           frozenset({SERVE})),
    Option("http", "the HTTP server: lean (targets/_lean.py: httptools, pipelining answered in order) or uvicorn",
           frozenset({SERVE}), default="lean", choices=("lean", "uvicorn")),
    Option("spec", "a run spec written by peakproof run (JSON): every other option is read from it",
           frozenset({LOCUST, PYTEST}), env="-"),
    Option("result", "write this stage's structured result here (JSON: outcome, reasons, checks)",
           frozenset({LOCUST, PYTEST}), env="-"),
)
