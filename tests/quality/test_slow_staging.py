"""A small staging box, met as a user with one would: the reference behind four pre-forked workers that
take about 40 holds a second (``tests/support/slow_tickets.py``). The calibration finds its knee (the
ladder ``peakproof plan --target-url`` climbs too), ``--scale auto`` runs at a rate it can take, the
placement names its processes, and a load ten times its knee FAILs it on latency and the pool
without the calibration's backlog spoiling the next stage."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests

from peakproof.launch import free_port
from tests.support.runs import skip_when_a_neighbour_left_it_undecided

ROOT = Path(__file__).resolve().parents[2]
# reads the machine, with a box whose workers answer by sleeping (about 40 holds/s): quiet (tests/support/room.py)
pytestmark = pytest.mark.quiet


@pytest.fixture(scope="module")
def slow_box() -> Iterator[tuple[str, list[int]]]:
    port = free_port()
    # a hold takes a quarter of the 100 ms limit: at --scale auto's half of the knee, a Poisson burst rarely queues
    # three holds. At 50 ms (half the limit) reserves that met a burst waited a hold or two there, and the p99 of 76
    # FAILed the box at 179 ms, truly (CI, once): the ladder's steps are evenly spaced, the load's arrivals are not
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.slow_tickets", str(port), "--delay", "0.025"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        workers = [int(p) for p in re.findall(r"\d+", line.split("workers", 1)[1].split("]")[0])]
        url = f"http://127.0.0.1:{port}/tickets"
        requests.get(f"{url}/health", timeout=5).raise_for_status()
        yield url, [proc.pid, *workers]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def holds_per_second(url: str, seconds: float = 3.0, clients: int = 8) -> float:
    """What the box really takes: clients sending holds back to back on a sold-out quota, counted."""
    requests.put(f"{url}/quotas/knee-truth", json={"capacity": 0, "hold_seconds": 60}, timeout=10).raise_for_status()
    done = [0]
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        with requests.Session() as s:
            i = 0
            while time.monotonic() < stop:
                s.post(f"{url}/quotas/knee-truth/reservations", timeout=10,
                       json={"buyer_id": f"b{k}-{i}", "quantity": 1, "request_id": f"r{k}-{i}"})
                done[0] += 1
                i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.monotonic() - t0)


def peakproof(*args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "peakproof", *args], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.decides
def test_scale_auto_finds_a_small_box_s_knee_within_twice_what_it_really_takes_runs_below_it_and_names_its_processes(
        slow_box) -> None:
    url, pids = slow_box
    code, out = peakproof("run", "tickets", "--target-url", url, "--skip-properties")
    # the same ladder as peakproof plan --target-url's (calibrate.climb, latency judged), one run less in the suite
    knee = float(re.search(r"kept its service levels up to about ([\d,.]+) arrivals/s \(its knee", out).group(1)
                 .replace(",", ""))
    truth = holds_per_second(url)
    print(f"\nknee {knee:.1f}/s, the box takes {truth:.1f} holds/s")
    assert truth / 2 <= knee <= truth * 2 and "(the target missed its limits)" in out, out[-4000:]
    placement = next(line for line in out.splitlines() if line.startswith("peakproof: placement:"))
    assert all(str(pid) in placement for pid in pids) and "allowed on core(s)" in placement, placement
    assert "the target's are the rest" not in out
    skip_when_a_neighbour_left_it_undecided((code, out))
    assert code == 0 and "verdict for tickets: PASS" in out, out[-4000:]


# a load of 400 arrivals/s at its peak: not a quiet run. Beside the quiet tests it came out INCONCLUSIVE naming
# them in every CI run (accepted, so it never showed its FAIL there); alone, it decides
@pytest.mark.alone
@pytest.mark.decides
def test_a_load_ten_times_a_small_box_s_knee_fails_it_on_latency_and_the_pool(slow_box) -> None:
    url, _ = slow_box
    code, out = peakproof("run", "tickets", "--target-url", url, "--scale", "0.02", "--skip-properties")
    assert "BEFORE THE LOAD: the curve does not fit the target" in out, out[-4000:]
    # the calibration's ladder stopped near the knee and let the box drain: the load's set-up was answered
    assert "target_setup_succeeded" not in out and "never answered" not in out
    skip_when_a_neighbour_left_it_undecided((code, out))
    assert code == 1 and "verdict for tickets: FAIL" in out, out[-4000:]
    assert "reserve p99 latency (intended)" in out and "the target's latency held the pool" in out
