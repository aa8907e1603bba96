"""Benchmark: the seed-scale opening (200,000 reservations over 10 virtual seconds) in process.

Prints wall times for generating the workload, replaying it with every operation recorded
in the history, and running the six tickets checks over that history. Goal (issue 2):
replay under 2 s on a 2-core machine, history included.

    python benchmarks/bench_opening.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from peakproof.cases.tickets import InProcessTickets, OpeningWorkload, check_tickets


def once(workload: OpeningWorkload) -> dict[str, float]:
    t0 = time.perf_counter()
    arrivals = list(workload.arrivals())
    t1 = time.perf_counter()
    driver = InProcessTickets()
    driver.put_quota("opening", workload.quota, workload.hold_seconds)
    clock, reserve = driver.clock, driver.reserve
    for t, buyer, qty, rid in arrivals:
        clock.set(t)
        reserve("opening", buyer, qty, rid, intended_time=t)
    driver.read_quota("opening")
    t2 = time.perf_counter()
    results = check_tickets(driver.history, driver.tolerance)
    t3 = time.perf_counter()
    assert all(r.valid is True for r in results), [r.summary() for r in results]
    return {"workload": t1 - t0, "replay": t2 - t1, "checks": t3 - t2, "total": t3 - t0,
            "ops": len(driver.history), "locks": driver.core.lock_acquisitions("opening")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--requests", type=int, default=200_000)
    args = p.parse_args()
    workload = OpeningWorkload(requests=args.requests)
    runs = [once(workload) for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in ("workload", "replay", "checks", "total")}
    print(f"opening: {workload.requests:,} reservations, quota {workload.quota:,}, {args.repeat} runs (median)")
    print(f"  workload generation (faker buyers, quantities) {med['workload']:.3f} s")
    print(f"  replay with history ({runs[0]['ops']:,} ops recorded)   {med['replay']:.3f} s  "
          f"-> {workload.requests / med['replay']:,.0f} reservations/s")
    print(f"  workload + replay                            {med['workload'] + med['replay']:.3f} s  (goal < 2 s)")
    print(f"  six checks over the history                  {med['checks']:.3f} s")
    print(f"  quota-row lock acquisitions                  {runs[0]['locks']:,}")


if __name__ == "__main__":
    main()
