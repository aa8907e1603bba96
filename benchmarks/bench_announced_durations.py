"""Benchmark: how long the URL properties say they will take, against how long they take.

For each case, its URL properties (the contract test aside: it announces nothing) against the
served reference (``peakproof serve <case>``, as ``peakproof.launch.ServedTarget`` starts it) and
against the same design on the standard library's ``http.server`` (``tests/support/stdlib_server.py``,
served as the ``<case>-on-stdlib`` variant); the notifications ones beside a provider simulator,
with the short rounds the quality tests state. Prints, per property that waits on real time, the
figure it said before it started, the last figure it said (from what it measured), what its call
took, and the ratios announced / took: the issue's bar is within 2x (0.5 to 2).

Run it alone (its figures are only fair when nothing else loads the machine)::

    flock /tmp/pp-load.lock python benchmarks/bench_announced_durations.py [--case tickets] [--server stdlib]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peakproof.cases import get_case
from peakproof.launch import ServedTarget  # noqa: E402
from tests.support.mutants import served  # noqa: E402

# The notifications servers' rules, served so and stated so (--rules): "short", the quality tests' rounds
# (tests/quality/test_served_mutants.py); "slow", rounds of 5 s with the seed's answer timeout and breaker
# (a staging service that keeps real retry timings, shorter than the seed's 30 s rounds).
RULES = {
    "short": dict(backoff=0.3, call_timeout=0.5, breaker_cool_down=1.0, breaker_window=20, breaker_failures=4),
    "slow": dict(backoff=5.0, call_timeout=2.0, breaker_cool_down=10.0, breaker_window=200, breaker_failures=24),
}
STATED = {"backoff": "--backoff", "call_timeout": "--answer-timeout", "breaker_window": "--breaker-window",
          "breaker_failures": "--breaker-failures", "breaker_cool_down": "--breaker-cool-down"}
PACE = re.compile(r"^  (?P<node>\S+::\S+): said about (?P<first>[\d.]+) s(?: \(then (?P<then>[^)]*), from what it "
                  r"measured\))?; took (?P<took>[\d.]+) s")


def run(case: str, server: str, profile: str, contract: bool = False, rules: str = "short") -> tuple[int, str, float]:
    """The case's URL properties against ``server`` (reference or stdlib): exit code, output, wall seconds.
    ``contract``: the contract test too (Schemathesis; it announces nothing). ``rules``: the notifications
    servers' (:data:`RULES`)."""
    with ExitStack() as stack:
        options: dict[str, object] = {}
        args: list[str] = []
        if case == "notifications":
            providers = stack.enter_context(ServedTarget("providers", latency=0.02))
            options = dict(RULES[rules], provider_url=providers.base)
            args = ["--provider-url", providers.base,
                    *(x for k, flag in STATED.items() for x in (flag, f"{RULES[rules][k]:g}"))]
        t = stack.enter_context(ServedTarget(get_case(case), **options) if server == "reference"  # type: ignore[arg-type]
                                else served(f"{case}-on-stdlib", **options))
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "properties" / f"test_{case}.py"), "-q", "-p",
               "no:cacheprovider", "--target-url", t.url, *args, *([] if contract else ["-k", "not openapi_contract"])]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                              env=dict(os.environ, HYPOTHESIS_PROFILE=profile))
        return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


def runs_asked(doc: str, profile_help: str) -> argparse.Namespace:
    """The command line both URL-property benchmarks take: ``--case``, ``--server`` (each repeatable), ``--profile``."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--case", action="append", choices=["tickets", "notifications", "feed"],
                   help="a case (repeatable; default all three)")
    p.add_argument("--server", action="append", choices=["reference", "stdlib"],
                   help="a server (repeatable; default both)")
    p.add_argument("--profile", default="ci", help=f"HYPOTHESIS_PROFILE (default ci, {profile_help})")
    p.add_argument("--rules", default="short", choices=sorted(RULES),
                   help="the notifications servers' rules, served and stated (default short: the quality tests')")
    return p.parse_args()


def main() -> int:
    args = runs_asked(__doc__, "as the quality tests")
    rows, worst = [], 1.0
    for case in args.case or ["tickets", "notifications", "feed"]:
        for server in args.server or ["reference", "stdlib"]:
            code, out, wall = run(case, server, args.profile, rules=args.rules)
            found = [m for line in out.splitlines() if (m := PACE.match(line))]
            if code not in (0, 6) or not found:
                print(f"{case} on {server}: exit {code}, {len(found)} figure(s) said\n{out[-3000:]}", file=sys.stderr)
            for m in found:
                said = [float(m["first"])] + [float(x.split()[0]) for x in (m["then"] or "").split(", ") if x]
                took = float(m["took"])
                test = m["node"].split("::")[1]
                r_first, r_last = said[0] / took, said[-1] / took
                furthest = max((s / took for s in said), key=lambda r: max(r, 1 / r))  # every figure it said
                worst = max(worst, furthest, 1 / furthest)
                rows.append((case, server, test[:56], said[0], said[-1], took, r_first, r_last, furthest, len(said),
                             code))
    print(f"{'case':14} {'server':9} {'property':56} {'said first':>10} {'said last':>9} {'took':>7} "
          f"{'first/took':>10} {'last/took':>9} {'furthest/took (of n said)':>25} {'exit':>4}")
    for case, server, test, first, last, took, r1, r2, far, n, code in rows:
        print(f"{case:14} {server:9} {test:56} {first:9.1f}s {last:8.1f}s {took:6.1f}s {r1:10.2f} {r2:9.2f} "
              f"{far:19.2f} ({n:2d}) {code:>4}")
    print(f"the furthest figure said was {worst:.2f}x off what its property took (the bar: 2x)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
