"""The open-model engine under real Locust runs against targets on 127.0.0.1.

Each test starts ``locust -f loadtests/`` as a child process (as a user would), bounded
in time and requests, and reads the verdict from the report's JSON sidecar.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from peakproof.cases import get_case
from peakproof.launch import free_port, wait_until_answering



ROOT = Path(__file__).resolve().parents[2]


from tests.support.locust_run import check, run_locust  # noqa: E402  (the run's --result, never a glob)
from tests.support.runs import undecided_by_a_neighbour  # noqa: E402


def test_no_scenario_named_is_a_clear_error_listing_the_scenarios(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--headless",
                           "--host", "http://127.0.0.1:9"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 4  # a usage error: its own code, not INCONCLUSIVE's 2
    assert "tickets-opening" in proc.stderr and "tickets-sold-out" in proc.stderr and "--scenario" in proc.stderr


def test_the_options_join_locust_s_parser_with_their_environment_variables() -> None:
    # Locust prints --help before it imports locustfiles, so options that locustfiles add
    # can never show there (a Locust limitation); they are on the parser Locust runs with.
    code = ("import runpy; runpy.run_path('loadtests/tickets.py'); "
            "from locust.argument_parser import get_parser; print(get_parser().format_help())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    for opt in ("--scenario", "--scale", "--time-scale", "--slo", "--pool-size", "PEAKPROOF_SCENARIO",
                "PEAKPROOF_SCALE"):
        assert opt in out, opt


def test_the_target_counts_every_arrival_the_report_says_was_sent_and_the_counts_add_up(serve_tickets,
                                                                                       tmp_path: Path) -> None:
    """What the engine guarantees on any machine: the curve ran to its end, every due arrival was
    sent or dropped, each sent one reached the target exactly once, and the exit code is the
    verdict's. How closely each second follows the curve depends on this machine's speed:
    ``benchmarks/bench_arrival_accuracy.py`` prints it."""
    served = serve_tickets()
    before = requests.get(f"{served.url}/_arrivals", timeout=5).json()["total"]
    rc, doc, out = run_locust(served.url, "tickets-sold-out", tmp_path, "--scale", "0.1", "--duration", "6")
    after = requests.get(f"{served.url}/_arrivals", timeout=5).json()["total"]
    result = check(doc, "load", "offered_load_matches_curve")
    load = result["counts"]
    print(f"\nplanned {load['planned']:,}, due {load['due']:,}, sent {load['sent']:,} ({load['late']:,} late), "
          f"dropped {load['dropped']:,}; the target received {after - before - 3:,} of them; "
          f"verdict {doc['verdict']['outcome']}")
    assert load["planned"] == int(get_case("tickets").peak_rate() * 0.1 * 6) and load["due"] == load["planned"], load  # the curve ran to its end
    assert load["sent"] + load["dropped"] == load["due"], load
    assert load["late"] <= load["sent"], load
    # each sent arrival once, plus the quota setup, the final read and this test's second look at the counter
    assert after - before == load["sent"] + 3, (before, after, load)
    # the reference keeps every invariant whatever this machine's speed (the load and the service levels
    # may miss on a slow one: those outcomes are the machine's, and the benchmark's business)
    assert all(r["valid"] is True for r in doc["checks"]), doc["checks"]
    assert rc == {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 2}[doc["verdict"]["outcome"]], (rc, doc["verdict"])


@pytest.mark.alone  # what this machine can offer: no other test beside it (tests/conftest.py)
def test_at_a_rate_this_machine_cannot_offer_the_report_states_the_shortfall(serve_tickets, tmp_path: Path) -> None:
    served = serve_tickets()
    # what peakproof run passes after its calibration: a curve above it is the machine's limit, whatever
    # filled the pool. One request in flight makes the shortfall certain on any machine (60,000/s would
    # need every round trip through loopback and a Python server in 17 us; about 100 us here); with the
    # default pool a fast machine offers such a curve, and the outcome would be its speed, not the engine's
    rc, doc, out = run_locust(served.url, "tickets-sold-out", tmp_path, "--scale", "3.0", "--duration", "2",
                              "--max-lateness", "0.5", "--calibrated-rate", "3000", "--pool-size", "1",
                              "--connections", "1")
    load = check(doc, "load", "offered_load_matches_curve")
    # above the calibrated rate the promise was not tested, which is not the target's failure
    assert rc == 2 and load["valid"] == "unknown" and doc["verdict"]["outcome"] == "INCONCLUSIVE"
    assert "Actual" in load["note"] and "Limit" in load["note"] and "could not offer" in load["note"]
    assert "above what this machine offered in calibration (3,000/s)" in load["note"]
    assert load["counts"]["sent"] - load["counts"]["late"] < load["counts"]["due"]
    print("\n" + load["note"])


def test_a_distributed_run_replays_the_schedule_once_in_total(serve_tickets, tmp_path: Path) -> None:
    served = serve_tickets()
    before = requests.get(f"{served.url}/_arrivals", timeout=5).json()["total"]
    port = str(free_port())  # the master's own port, not Locust's 5557: another Locust on this machine may hold it
    rc, doc, out = run_locust(served.url, "tickets-sold-out", tmp_path, "--scale", "0.05", "--duration", "4",
                              "--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
                              "--master-port", port)
    print(f"\n{doc['params']['processes']} processes: planned {get_case('tickets').peak_rate() * 0.05 * 4:.0f}, "
          f"sent {check(doc, 'load', 'offered_load_matches_curve')['counts']['sent']}")
    after = requests.get(f"{served.url}/_arrivals", timeout=5).json()["total"]
    load = check(doc, "load", "offered_load_matches_curve")["counts"]
    planned = int(get_case("tickets").peak_rate() * 0.05 * 4)
    assert doc["params"]["processes"] == 2
    # every planned arrival fell due once over the two processes, and was sent or (too late: a neighbour took the
    # CPU, beside busy-neighbour in one quickstart run of three) dropped, never both and never twice
    assert load["planned"] == planned and load["due"] == planned, load
    assert load["sent"] + load["dropped"] == planned, load
    # the target saw each reservation sent once, plus the quota setup, the final read and this test's own look at
    # the counter
    assert after - before == load["sent"] + 3, (before, after, load)
    # and the verdict: a PASS, or INCONCLUSIVE naming the neighbour that took CPU the run needed (the suite's own
    # busy tests in CI, every time: the schedule's promise above is decided by the counts whatever the latency)
    assert rc == 0 or (rc == 2 and undecided_by_a_neighbour((rc, out))), out[-3000:]


@pytest.mark.alone  # it accepts INCONCLUSIVE naming a neighbour: the suite must not be that neighbour
def test_intended_start_latency_shows_a_stall_that_send_latency_hides(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.stall_target", str(port), "5", "1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_answering(f"http://127.0.0.1:{port}/tickets/health", 5.0, proc=proc)
        # 200 requests/s for 10 s through 4 in-flight requests: a closed loop's view of a stall
        rc, doc, out = run_locust(f"http://127.0.0.1:{port}/tickets", "tickets-sold-out", tmp_path,
                                  "--scale", "0.01", "--duration", "10", "--pool-size", "4", "--connections", "4",
                                  "--max-lateness", "3", "--slo", "reserve:p99<=250ms",
                                  "--slo", "reserve:p99<=250ms@send")
    finally:
        proc.kill()
    intended = check(doc, "slos", "reserve p99 latency (intended)")
    sent = check(doc, "slos", "reserve p99 latency (send)")
    print(f"\np99 from intended start {intended['actual']['value'] * 1000:.0f} ms; "
          f"p99 from actual send {sent['actual']['value'] * 1000:.0f} ms")
    assert intended["actual"]["value"] * 1000 > 600 and sent["actual"]["value"] * 1000 < 250
    # judged: a FAIL and a pass. On a shared host the miss is undecided, naming the neighbour (never
    # blamed); the send latency, far inside its limit, held whatever the neighbour did (a limit kept with
    # less CPU is kept) or is undecided with it, and never fails
    if intended["valid"] == "unknown":
        assert "processes outside the run" in (intended["note"] or ""), intended
        assert sent["valid"] in (True, "unknown"), sent
    else:
        assert intended["valid"] is False and sent["valid"] is True


@pytest.mark.alone  # two runs' verdicts compared: a neighbour in one of them only would differ them
def test_a_master_and_two_workers_on_their_own_addresses_give_the_verdict_of_one_process(serve_tickets,
                                                                                        tmp_path: Path) -> None:
    """Distributed for real: three Locust processes as three hosts (127.0.0.2 the master, 127.0.0.3 and
    .4 the workers' requests), the schedule split between the workers, their histories merged on the
    master, which judges: the same curve's verdict and counts as one process gives."""
    served = serve_tickets()
    args = ["--scenario", "tickets-sold-out", "--scale", "0.05", "--duration", "4", "--only-summary",
            "--loglevel", "WARNING"]
    single_rc, single, single_out = run_locust(served.url, "tickets-sold-out", tmp_path / "single", "--scale", "0.05",
                                               "--duration", "4")
    before = requests.get(f"{served.url}/_arrivals", timeout=5).json()["by_peer"]
    port = free_port()
    base = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests")]
    master = subprocess.Popen(base + ["--headless", "--master", "--master-bind-host", "127.0.0.2", "--master-bind-port",
                                      str(port), "--expect-workers", "2", "--host", served.url, "--report-dir",
                                      str(tmp_path / "distributed"), "--result", str(tmp_path / "distributed.json"),
                                      *args],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [subprocess.Popen(base + ["--worker", "--master-host", "127.0.0.2", "--master-port", str(port),
                                        "--source-address", f"127.0.0.{k}", "--loglevel", "WARNING"],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for k in (3, 4)]
    try:
        out, _ = master.communicate(timeout=120)
        for w in workers:
            w.wait(timeout=30)
    finally:
        for p in (master, *workers):
            if p.poll() is None:
                p.kill()
    assert (tmp_path / "distributed.json").exists(), out[-3000:]
    report = json.loads((tmp_path / "distributed.json").read_text())["report"]
    doc = json.loads(Path(report).with_suffix(".json").read_text())
    after = requests.get(f"{served.url}/_arrivals", timeout=5).json()["by_peer"]
    sent_from = {peer: after.get(peer, 0) - before.get(peer, 0) for peer in after}
    planned = int(get_case("tickets").peak_rate() * 0.05 * 4)
    load = check(doc, "load", "offered_load_matches_curve")["counts"]
    print(f"\nmaster 127.0.0.2, workers 127.0.0.3 and .4: the target counted {sent_from}; merged on the master: "
          f"planned {load['planned']:,}, sent {load['sent']:,}, late {load['late']:,}; "
          f"verdict {doc['verdict']['outcome']} (one process: {single['verdict']['outcome']})")
    assert doc["params"]["processes"] == 2
    # each worker sent its half of the schedule from its own address, and nothing else was sent
    assert sent_from.get("127.0.0.3", 0) + sent_from.get("127.0.0.4", 0) == planned
    assert abs(sent_from["127.0.0.3"] - sent_from["127.0.0.4"]) <= 1
    assert load["planned"] == load["sent"] == planned
    # the merged history was judged as one: the same checks, the same outcomes as one process
    outcome = {(r["name"], str(r["valid"])) for group in ("checks", "slos", "load") for r in doc[group]}
    assert outcome == {(r["name"], str(r["valid"])) for group in ("checks", "slos", "load") for r in single[group]}
    assert doc["verdict"]["outcome"] == single["verdict"]["outcome"] == "PASS", out[-3000:]
    assert master.returncode == single_rc == 0
