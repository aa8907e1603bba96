"""The options of ``locust -f loadtests/``: peakproof's group on Locust's parser.

Each option also reads an environment variable (``PEAKPROOF_<NAME>``), named in its help.
Locust prints ``--help`` before it loads locustfiles, so these do not show in ``locust
--help``; an unknown ``--scenario`` lists the scenarios instead. Imports locust: only
Locust processes load it (through :mod:`peakproof.loadgen`).
"""

from __future__ import annotations

from typing import Any

from locust import events


def _scenarios() -> list[str]:
    from .loadgen import SCENARIOS

    return list(SCENARIOS)


class _Group:
    """An argument group whose help names each option's environment variable."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def add_argument(self, *names: str, env_var: str, help: str = "", **kw: Any) -> None:
        # Locust's web UI shows the options marked so (its parser marks only its own add_argument's)
        name = names[0].lstrip("-").replace("-", "_")
        secret = kw.pop("is_secret", False)
        action = self.group.add_argument(*names, env_var=env_var, help=f"{help} [env {env_var}]".strip(), **kw)
        action.include_in_web_ui = name in IN_WEB_UI
        action.is_secret, action.is_required, action.is_multiple = secret, False, False
        if action.dest not in OPTIONS:
            OPTIONS.append(action.dest)


# The start form of Locust's web UI: what a user picks a run by (the rest stays on the command line)
IN_WEB_UI = ("scenario", "scale", "time_scale", "duration", "provider_url", "admin_token", "lease_seconds",
             "report_dir")
OPTIONS: list[str] = []  # every peakproof option's dest: what a master sends its workers


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    g = _Group(parser.add_argument_group("peakproof", "open-model scenarios (peakproof)"))
    g.add_argument("--scenario", env_var="PEAKPROOF_SCENARIO", default="", choices=[""] + sorted(_scenarios()),
                   help="which scenario to run (required): " + ", ".join(sorted(_scenarios())) + " ...")
    g.add_argument("--scale", env_var="PEAKPROOF_SCALE", type=float, default=1.0,
                   help="multiply the curve's rate and the case's size (the curve's duration stays)")
    g.add_argument("--time-scale", env_var="PEAKPROOF_TIME_SCALE", type=float, default=1.0,
                   help="divide the case's windows (hold, backoff) and later phases by this")
    g.add_argument("--slo", env_var="PEAKPROOF_SLO", action="append", default=None,
                   help="service level, OP:STAT<=LIMIT[@intended|@send] (repeatable); default: the seed's")
    g.add_argument("--spacing", env_var="PEAKPROOF_SPACING", choices=["uniform", "poisson"], default="uniform")
    g.add_argument("--seed", env_var="PEAKPROOF_SEED", type=int, default=20260730)
    g.add_argument("--pool-size", env_var="PEAKPROOF_POOL_SIZE", type=int, default=1000,
                   help="greenlets (and connections) in flight at most, per process")
    g.add_argument("--connections", env_var="PEAKPROOF_CONNECTIONS", type=int, default=1000,
                   help="HTTP connections per process at most (default: one per request in flight, opened only as "
                        "needed); fewer makes requests wait for one, timed as latency")
    g.add_argument("--source-address", env_var="PEAKPROOF_SOURCE_ADDRESS", default=None,
                   help="the local address this process's requests leave from (a generator with several "
                        "addresses or interfaces; e.g. 127.0.0.3)")
    g.add_argument("--request-timeout", env_var="PEAKPROOF_REQUEST_TIMEOUT", type=float, default=5.0)
    g.add_argument("--max-lateness", env_var="PEAKPROOF_MAX_LATENESS", type=float, default=2.0,
                   help="an arrival not sent this many s after its instant is dropped (and counted)")
    g.add_argument("--late-threshold", env_var="PEAKPROOF_LATE_THRESHOLD", type=float, default=0.1,
                   help="an arrival sent more than this many s after its instant is late (not offered on time)")
    g.add_argument("--offered-tolerance", env_var="PEAKPROOF_OFFERED_TOLERANCE", type=float, default=0.02,
                   help="the run fails when it offered less than the curve by more than this share")
    g.add_argument("--admin-token", env_var="PEAKPROOF_ADMIN_TOKEN", default=None, is_secret=True)
    g.add_argument("--report-dir", env_var="PEAKPROOF_REPORT_DIR", default="reports")
    g.add_argument("--save-history", env_var="PEAKPROOF_SAVE_HISTORY", action="store_true",
                   help="also write the merged history (one JSON op a line) beside the report")
    g.add_argument("--duration", env_var="PEAKPROOF_DURATION", type=float, default=None,
                   help="length of constant-rate scenarios, s (tickets-sold-out: 10; notifications: 60; feed: 30)")
    g.add_argument("--provider-url", env_var="PEAKPROOF_PROVIDER_URL", default=None,
                   help="notifications: the providers' base URL (their record is the ground truth)")
    from .cases.notifications.checks import DeliveryRules

    for flag, name, kind, text in DeliveryRules.OPTIONS:  # the target's own rules, which the checks judge by
        more = " (default 30 / --time-scale)" if name == "backoff" else ""
        g.add_argument(flag, dest=name, env_var="PEAKPROOF_" + flag[2:].upper().replace("-", "_"), type=kind,
                       default=None, help=f"notifications: {text}{more}")
    g.add_argument("--lease-seconds", env_var="PEAKPROOF_LEASE_SECONDS", type=float, default=None,
                   help="tickets-lease-faults: the target's lock lease, s (default 2, the reference's); sales must "
                        "resume within it after a lock holder stalls or dies")
    g.add_argument("--consumer-share", env_var="PEAKPROOF_CONSUMER_SHARE", type=float, default=None,
                   help="feed-slow-consumer: the consumers' rate as a share of the write work (default the seed's "
                        "1,000 of 1,247.71 writes/s)")
    g.add_argument("--max-run-seconds", env_var="PEAKPROOF_MAX_RUN_SECONDS", type=float, default=900.0,
                   help="hard bound on the run, whatever the scenario says")
    g.add_argument("--calibration-out", env_var="PEAKPROOF_CALIBRATION_OUT", default=None,
                   help="calibration scenarios: write the measured steps here (JSON)")
    g.add_argument("--calibrate-max-rate", env_var="PEAKPROOF_CALIBRATE_MAX_RATE", type=float, default=None,
                   help="calibration scenarios: the top step's arrivals/s (default: the seed's peak)")
    g.add_argument("--calibrate-latency", env_var="PEAKPROOF_CALIBRATE_LATENCY", action="store_true",
                   help="calibration scenarios: a step passes only if the target also answered in time "
                        "(use when the target shares this machine)")
    g.add_argument("--calibrated-rate", env_var="PEAKPROOF_CALIBRATED_RATE", type=float, default=None,
                   help="on-time arrivals/s one generator process offered in a calibration (peakproof run "
                        "measures it); named in the verdict when the generator falls behind")
