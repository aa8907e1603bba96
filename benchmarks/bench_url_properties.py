"""Benchmark: how long ``pytest properties/test_<case>.py --target-url`` takes, and what it put to the test.

For each case, the whole URL property file (the contract test included) against the served reference and
against the same design on the standard library's ``http.server`` (as ``bench_announced_durations.py``
serves them: the notifications ones beside a provider simulator, their short rounds stated). Prints each
run's wall time and exit code, then every check's chances to fail side by side, as the properties print
them at their end: "most / in all", the most one judgement had (the largest example's) and every example's
added up (what the run put to the test; properties that print only the first are shown with "-"). The
figures a change that makes the runs shorter must keep (issue 47: at most 3 minutes a run on 2 cores, every
check's chances at least as many).

Run it alone (wall times are only fair when nothing else loads the machine)::

    flock /tmp/pp-load.lock python benchmarks/bench_url_properties.py [--case feed] [--server stdlib]
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_announced_durations import run, runs_asked  # noqa: E402

CHANCES = re.compile(r"^  (?P<check>\w+): (?P<n>[\d,]+)(?:; (?P<all>[\d,]+) in all)?")


def chances(out: str) -> dict[str, str]:
    """The properties' closing table, ``check: N; M in all`` under "chances to fail, per check", as "N / M"."""
    table: dict[str, str] = {}
    inside = False
    for line in out.splitlines():
        if "chances to fail, per check" in line:
            inside = True
        elif inside and (m := CHANCES.match(line)):
            table[m["check"]] = f"{int(m['n'].replace(',', '')):,} / " + (
                f"{int(m['all'].replace(',', '')):,}" if m["all"] else "-")
        elif inside and line.startswith("="):
            break
    return table


def main() -> int:
    args = runs_asked(__doc__, "as a team's CI job")
    runs = []
    for case in args.case or ["tickets", "notifications", "feed"]:
        for server in args.server or ["reference", "stdlib"]:
            code, out, wall = run(case, server, args.profile, contract=True, rules=args.rules)
            if code not in (0, 6):
                # the whole output kept: a rare failure's evidence is lost if only a piped tail of it was read
                stamp = time.strftime("%H%M%S")
                kept = Path(tempfile.gettempdir()) / f"bench_url_properties-{case}-{server}-{stamp}.txt"
                kept.write_text(out, encoding="utf-8")
                print(f"{case} on {server}: exit {code} (its whole output: {kept})\n{out[-3000:]}", file=sys.stderr)
            runs.append((f"{case}/{server}", code, wall, chances(out)))
            print(f"{case:14} {server:9} {wall:7.1f} s  exit {code}", flush=True)
    checks = sorted({c for *_, table in runs for c in table})
    print(f"\n{'check':44}" + "".join(f"{name:>24}" for name, *_ in runs))
    for check in checks:
        print(f"{check:44}" + "".join(f"{table[check]:>24}" if check in table else f"{'-':>24}"
                                      for *_, table in runs))
    print(f"{'wall (s)':44}" + "".join(f"{wall:>24.1f}" for _, _, wall, _ in runs))
    print(f"the longest run took {max(w for _, _, w, _ in runs):.1f} s (issue 47's bar: 180 s)")
    return 0 if all(code == 0 for _, code, _, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
