"""The ticket shop's real stack (``examples/stacks/tickets``): Flask under gunicorn (gthread worker
processes) on PostgreSQL through psycopg 3, an expiry job of its own, and an API of its own, driven
only through ``examples/stacks/tickets/driver.py``.

Every entry point a team would use, on the correct stack: ``peakproof driver check``, the properties
as installed (``pytest --pyargs peakproof.properties.test_tickets``, from a folder of the team's own),
``peakproof run`` with a short load, and Locust's own ``locust -f "$(peakproof locustfile)"``. Then the
stack with its defect (``--defect check-then-act``: stock read without a lock, ``held = held + n``
later), which ``peakproof run`` must FAIL naming ``no_oversell``.

The shop states one rule, as its README says: its expiry job runs every second and a lapsed hold sells
until it has run (``--release-lag 3``). One correct stack per module; a stack that cannot start fails
the tests that need it with the launcher's own words, never skips them.

Run it alone (the loads read the machine): ``flock /tmp/pp-load.lock pytest tests/stacks/test_tickets_stack.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.runs import (ROOT, decided, locust_verdict, misses_naming_no_statement, peakproof,
                                skip_when_a_neighbour_left_it_undecided, verdict_of)
from peakproof.cases.tickets.case import DESIGN



# the shop's own processes: named as a neighbour, discovery missed a part of the target
COMPONENTS = ("gunicorn", "postgres", "expiry")
DRIVER = "examples/stacks/tickets/driver.py:PgTicketShop"
ADMIN = ["--admin-token", "shop-admin-key"]  # the launcher's default X-Shop-Admin key
RULES = ["--release-lag", "3"]  # the shop's stated rule: its job releases lapsed holds every 1 s
# the opening at 1% of the seed: 200 arrivals/s for 10 s on a 50-ticket event, then its hold window. At 2% (400/s)
# the shop's two sync workers, PostgreSQL and the generator on 2 cores answered at p99 60 to 139 ms: a FAIL of
# the shop's own latency once in CI, true of the stack on such a box but not what this test is about
LOAD = ["--scale", "0.01", "--calibrated-rate", "1000", "--hold-window", "0.3", "--skip-properties"]
# The defect's run is the whole of peakproof run: the properties (whose burst at a sell-out is where two buyers
# meet the stale read: oversold by 10, 5 and 7 in the three runs measured), then the load with arrivals spaced as
# a Poisson process (they cluster, as buyers' do at an opening). Evenly spaced, 400/s puts arrivals 2.5 ms apart,
# longer than this shop's check-to-act window most of the time: measured, the load alone FAILed the defect 5 runs
# of 8 with even spacing, 6 of 7 with Poisson spacing (oversold by 1 to 6); both stages together FAILed 3 of 3.
# The correct shop's load keeps the harness's default, even spacing.
# At --scale auto (the must-show) the calibration sizes the opening to this machine. Each violated check's
# witness is replayed against the shop for up to 60 s in all (the suite's default is 0: tests/conftest.py).
DEFECT_LOAD = ["--scale", "auto", "--hold-window", "0.3", "--spacing", "poisson", "--replay-seconds", "60"]
START_TIMEOUT = 120  # s: initdb, PostgreSQL, the schema, the job and gunicorn's workers, on a busy machine


@contextmanager
def stack(folder: Path, *flags: str) -> Iterator[str]:
    """``python -m examples.stacks.tickets`` as a user starts it; its base URL, then SIGTERM (which stops
    gunicorn, the job and PostgreSQL). It fails the test with everything the launcher said if no URL comes."""
    proc = subprocess.Popen([sys.executable, "-m", "examples.stacks.tickets", "--folder", str(folder), *flags],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said: list[str] = []
    ready = threading.Event()

    def read() -> None:  # drained to the end, so the launcher never blocks on a full pipe
        for line in proc.stdout:  # type: ignore[union-attr]
            said.append(line)
            if "listening on" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait(START_TIMEOUT)
        url = next((line.split()[-1] for line in said if line.startswith("listening on")), None)
        if url is None:
            logs = "".join(f"\n--- {p.name} (tail)\n" + p.read_text(errors="replace")[-1500:]
                           for p in (folder / "gunicorn.log", folder / "expiry.log", folder / "pg" / "log",
                                     folder / "postgres.log")
                           if p.is_file())
            pytest.fail(f"the tickets stack {' '.join(flags) or '(correct)'} did not start within {START_TIMEOUT} s "
                        f"(launcher exit {proc.poll()}): {''.join(said)[-3000:]}{logs}", pytrace=False)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(folder / "pg", ignore_errors=True)  # the database (tens of MB); the logs stay


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with stack(tmp_path_factory.mktemp("tickets-stack")) as url:
        yield url


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tickets-reports"))


# -- the correct stack -----------------------------------------------------------------------------------

def test_the_driver_answers_every_call_as_the_harness_needs(shop: str) -> None:
    out = peakproof("driver", "check", "tickets", "--driver", DRIVER, "--target-url", shop, *ADMIN, *RULES,
                    timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every call answered as the harness needs" in out.stdout, out.stdout
    assert "[NO ]" not in out.stdout, out.stdout
    assert "capability setup: offered" in out.stdout, out.stdout
    assert "rule: release lag (s): 3" in out.stdout, out.stdout
    assert "fail 'sold_out'" in out.stdout and "fail 'idempotency_key_reused'" in out.stdout, out.stdout


def test_the_properties_pass_as_installed_from_a_folder_of_the_teams_own(shop: str, tmp_path: Path) -> None:
    # the ci profile, as a team's CI runs it: derandomized, every run draws the same steps
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--pyargs",
                          "peakproof.properties.test_tickets", "--target-url", shop, "--driver",
                          str(ROOT / DRIVER), *ADMIN, *RULES],
                         cwd=tmp_path, capture_output=True, text=True, timeout=420, env=env)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-5000:]
    # the three that drive a URL through a driver: any sequence, the lapsed hold paid late, the burst at sell-out
    assert "3 passed" in out.stdout and "failed" not in out.stdout, text[-5000:]
    assert "tickets: release lag (s): 3" in out.stdout, text[-5000:]
    assert "  no_oversell: " in out.stdout and "  expired_hold_is_never_sold: " in out.stdout, text[-5000:]


@pytest.mark.alone  # a load: its latency and pace read the machine (tests/conftest.py)
@pytest.mark.decides
def test_peakproof_run_passes_the_load_with_the_shops_rule_stated(shop: str, reports: str) -> None:
    out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", shop, *ADMIN, *RULES, *LOAD,
                    "--report-dir", reports, "--replay-seconds", "60")
    verdict = verdict_of(out)
    skip_when_a_neighbour_left_it_undecided(out, COMPONENTS)  # a busy machine: the neighbour named, nothing FAILed
    assert out.returncode == 0, verdict
    assert "peakproof verdict for tickets: PASS" in verdict and "[ok] load scenario tickets-opening" in verdict, verdict
    assert "rule: release lag (s): 3" in verdict, verdict
    # a PASS has no witness and sends no replay (a replay is a FAIL's, after its verdict)
    assert "witness of" not in out.stdout and "replaying the witness" not in out.stdout, verdict
    for check in ("no_oversell", "stock_is_conserved", "no_valid_rejection", "reservation_is_idempotent",
                  "expired_hold_is_never_sold", "units_return_exactly_once"):
        assert f"[ok] {check}: Actual 0 violations" in verdict, (check, verdict)
    # the shop is a system: its database and its expiry job are the target's, found with no option given
    load = next(line for line in out.stdout.splitlines() if line.startswith("peakproof: tickets-opening: CPU"))
    assert_the_shops_components(load)


def assert_the_shops_components(line: str) -> None:
    """A stage's line names the shop's three components, each found from gunicorn's socket (none stated)."""
    assert "gunicorn x" in line and "(serves the URL)" in line, line
    assert "postgres x" in line and "(found: connected from gunicorn)" in line, line
    # started by the stack's launcher, as gunicorn was: kin of the target, so the target's
    assert "expiry x1" in line and "(found: a client of postgres; kin: started by tickets" in line, line
    assert "0 stated" in line, line


# -- the shop with a slow database: the target's own miss, and a neighbour's ----------------------------------

# each reservation spends 50 ms in PostgreSQL and 60 ms of its worker's CPU (thread time: as long on any machine):
# p99 over the seed's 100 ms at any rate. At 20 arrivals/s the workers need about 1.3 cores in the peak, which
# leaves this 2-core machine CPU to spare (measured: p99 127 to 159 ms with the CPU part alone)
SLOW = ["--slow-query", "50", "--cpu-per-request", "60"]
SLOW_LOAD = ["--scale", "0.001", "--calibrated-rate", "1000", "--hold-window", "0.3", "--skip-properties"]


@pytest.fixture(scope="module")
def slow_shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with stack(tmp_path_factory.mktemp("tickets-stack-slow"), *SLOW) as url:
        yield url


@pytest.mark.alone
@pytest.mark.decides
def test_a_shop_whose_database_is_slow_fails_its_latency_naming_the_busiest_component(slow_shop: str,
                                                                                      reports: str) -> None:
    """Its database, backends and job counted as the shop's, nothing outside it busy: a latency miss is the
    shop's FAIL (it was INCONCLUSIVE when PostgreSQL's backends were counted as neighbours), and the
    verdict names where the target's CPU went. Its invariants still hold."""
    out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", slow_shop, *ADMIN, *RULES, *SLOW_LOAD,
                    "--report-dir", reports)
    verdict = verdict_of(out)
    skip_when_a_neighbour_left_it_undecided(out, COMPONENTS)  # a busy machine: the neighbour named, nothing FAILed
    assert out.returncode == 1 and "peakproof verdict for tickets: FAIL" in verdict, verdict
    assert "[FAIL] reserve p99 latency" in verdict, verdict
    assert "the target's busiest component: " in verdict, verdict
    assert "[ok] no_oversell: Actual 0 violations" in verdict, verdict
    load = next(line for line in out.stdout.splitlines() if line.startswith("peakproof: tickets-opening: CPU"))
    assert_the_shops_components(load)


@pytest.mark.alone
def test_the_slow_shop_beside_a_neighbour_arriving_mid_run_is_inconclusive_never_failed(slow_shop: str,
                                                                                       reports: str) -> None:
    """The same miss, with two busy loops outside the run and the target arriving 15 s in (as
    ``busy-neighbour --after 15 --hogs 2``): the harness cannot tell the shop's miss from the CPU taken from
    it, so the latency is not decided and the run names the neighbour; it never FAILs the shop for it."""
    hogs: list[subprocess.Popen[bytes]] = []
    arrive = threading.Timer(15.0, lambda: hogs.extend(
        subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)))
    arrive.start()
    try:
        out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", slow_shop, *ADMIN, *RULES, *SLOW_LOAD,
                        "--report-dir", reports, again=False)  # the neighbour is this test's own: never run again
    finally:
        arrive.cancel()
        for hog in hogs:
            hog.kill()
            hog.wait()
    verdict = verdict_of(out)
    assert hogs, "the neighbour never arrived: the run ended within 15 s"
    assert out.returncode == 2 and "peakproof verdict for tickets: INCONCLUSIVE" in verdict, verdict
    assert "a neighbour took CPU the run needed" in verdict and "[FAIL]" not in verdict, verdict


@pytest.mark.alone
@pytest.mark.decides
def test_locust_with_the_installed_locustfile_passes(shop: str, reports: str) -> None:
    locustfile = subprocess.run([sys.executable, "-m", "peakproof", "locustfile"], cwd=ROOT, capture_output=True,
                                text=True, timeout=60).stdout.strip()
    assert locustfile and Path(locustfile).exists(), f"peakproof locustfile gave {locustfile!r}"
    out = decided(lambda: subprocess.run(
        [sys.executable, "-m", "locust", "-f", locustfile, "--headless", "--scenario", "tickets-opening",
         "--host", shop, "--driver", DRIVER, *ADMIN, *RULES, "--scale", "0.01", "--report-dir", reports],
        cwd=ROOT, capture_output=True, text=True, timeout=300))
    text = out.stdout + out.stderr
    skip_when_a_neighbour_left_it_undecided(out, COMPONENTS)  # a busy machine: the neighbour named, nothing FAILed
    assert out.returncode == 0, locust_verdict(out)
    assert "[ok] no_oversell: Actual 0 violations" in text, text[-5000:]
    assert "[ok] offered_load_matches_curve" in text and "release lag" in text, text[-5000:]


# -- the shop of its own design: holds that never lapse --------------------------------------------------------

NEVER_LAPSE = ["--holds-never-lapse"]  # the launcher's variant, and the statement a team makes of it to peakproof


@pytest.fixture(scope="module")
def never_lapse_shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with stack(tmp_path_factory.mktemp("tickets-stack-holds-never-lapse"), *NEVER_LAPSE) as url:
        yield url


def test_a_shop_whose_holds_never_lapse_passes_the_url_properties_with_its_design_stated(never_lapse_shop: str,
                                                                                     reports: str) -> None:
    """Its holds last until paid or cancelled (``expires_at`` ten years on, no expiry job): stated, the one check
    it makes meaningless is left out by name, every other is judged and holds, and no property plans a wait for a
    lapse. (The properties alone: they read no machine, so beside the suite; the load below runs alone.)"""
    out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", never_lapse_shop, *ADMIN, *NEVER_LAPSE,
                    "--hold-window", "0.3", "--skip-load", "--report-dir", reports)
    verdict = verdict_of(out)
    assert out.returncode == 0 and "peakproof verdict for tickets: PASS" in verdict, verdict
    assert "stated: --holds-never-lapse" in verdict and "not checked: expired_hold_is_never_sold" in verdict, verdict
    assert "[ok] properties (Hypothesis)" in verdict, verdict
    for check in ("no_oversell", "no_valid_rejection", "hold_honoured_until_it_expires"):
        assert re.search(rf"\b{check} [1-9]", verdict), (check, verdict)  # judged, with chances
    assert "past --max-wait" not in out.stdout, verdict  # stated, no property plans a wait for a lapse


@pytest.mark.alone  # a load that must PASS: its latency and pace read the machine (tests/conftest.py)
@pytest.mark.decides
def test_a_shop_whose_holds_never_lapse_passes_the_load_with_its_design_stated(never_lapse_shop: str,
                                                                              reports: str) -> None:
    """Stated, the load plans no payment after a lapse (its would-be late payers cancel instead: its units come
    back the one way this shop returns them), and every check it judges holds."""
    out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", never_lapse_shop, *ADMIN, *NEVER_LAPSE,
                    "--scale", "0.01", "--calibrated-rate", "1000", "--hold-window", "0.3", "--skip-properties",
                    "--report-dir", reports)
    verdict = verdict_of(out)
    skip_when_a_neighbour_left_it_undecided(out, COMPONENTS)  # a busy machine: the neighbour named, nothing FAILed
    assert out.returncode == 0 and "peakproof verdict for tickets: PASS" in verdict, verdict
    assert "stated: --holds-never-lapse" in verdict and "[ok] load scenario tickets-opening" in verdict, verdict
    assert "[waived] expired_hold_is_never_sold" in verdict, verdict
    for check in ("no_oversell", "no_valid_rejection", "units_return_exactly_once", "hold_honoured_until_it_expires"):
        assert f"[ok] {check}: Actual 0 violations" in verdict, (check, verdict)


# -- the defect --------------------------------------------------------------------------------------------

# alone: the race reads the machine. Begun with the examples' tier's other long runs (77 to 89% of the machine
# theirs), the properties' burst met no race in two runs of two, and the load's witness of 116 operations was
# neither shrunk in its 30 s nor reproduced: the test failed though the load found the oversell. A neighbour's CPU
# serializes the buyers it starves, and the shrink replays a race whose timing it moved.
@pytest.mark.alone
def test_the_check_then_act_defect_in_a_shop_of_its_own_design_fails_no_oversell_in_both_stages_with_a_witness(
        tmp_path_factory: pytest.TempPathFactory, reports: str) -> None:
    """Stock read without a lock and ``held = held + n`` later: buyers who read the last tickets at once all
    get them. In the shop whose holds never lapse, that design left unstated beside the bug: ``peakproof run
    --scale auto`` must FAIL naming no_oversell in the properties (their burst at a sell-out) and in the load
    (its opening's sell-out), and every other check it did not pass names the statement that explains it. The
    witness is shrunk to at most 10 operations and fails again in its 10 tries; its script, run against a fresh
    shop, FAILs again. (How often a race of 5 concurrent buyers fails again is the machine's as much as the
    witness's: 5 to 10 of 10 beside a calm tier, 3 of 10 when it began with the tier's every other long run.)"""
    flags = ("--defect", "check-then-act", *NEVER_LAPSE)
    with stack(tmp_path_factory.mktemp("tickets-stack-check-then-act"), *flags) as url:
        out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", url, *ADMIN, *DEFECT_LOAD,
                        "--report-dir", reports)
        verdict = verdict_of(out)
        if "no_oversell: FAIL" not in verdict:  # the properties' burst at a sell-out is a race too: beside the
            # tier's other runs (75% of the machine taken) one stage came out "2 passed, 18 skipped", undecided,
            # naming the neighbour. Drawn again, with the load's miss below judged the same way
            again = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", url, *ADMIN, *DEFECT_LOAD,
                              "--skip-load", "--report-dir", reports)
            print("the first properties' stage missed the race; the second: " + next(
                (line.strip() for line in verdict_of(again).splitlines() if "no_oversell: FAIL" in line
                 or "properties (Hypothesis)" in line), "no line"))
            out = subprocess.CompletedProcess(out.args, out.returncode, out.stdout + again.stdout, out.stderr)
            verdict += "\n" + verdict_of(again)
        if "[FAIL] no_oversell" not in verdict:  # a race: the load's opening met it 6 runs of 7 (its sell-out's
            # buyers clustered). A second load, alone, is the same opening drawn again; a PASS there is no excuse
            again = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", url, *ADMIN, *DEFECT_LOAD,
                              "--skip-properties", "--report-dir", reports)
            print("the first load missed the race; the second: " + next(
                (line.strip() for line in verdict_of(again).splitlines() if "no_oversell" in line), "no line"))
            verdict += "\n" + verdict_of(again)
    assert out.returncode == 1, verdict
    assert "peakproof verdict for tickets: FAIL" in verdict, verdict
    # the properties' stage says "no_oversell: FAIL (...)", the load's "[FAIL] no_oversell: Actual ..."
    assert "no_oversell: FAIL" in verdict and "[FAIL] no_oversell" in verdict, verdict
    assert "oversold by" in verdict, verdict
    # its holds answer an expires_at ten years on: the property that pays a lapsed hold would wait for that, and is
    # not run past --max-wait (before, it said "about 5256000.0 min" and hung)
    assert "past --max-wait (5.0 min)" in out.stdout, verdict
    # the design differences beside it: a check left undecided or failed for them says what to state (a check by
    # name; a latency left undecided by a busy host, "[??] reserve p99 latency (intended)", is no design's)
    bugs = ("no_oversell", "stock_is_conserved", "no_valid_rejection", "units_return_exactly_once")  # the bug's
    unnamed = misses_naming_no_statement(verdict, DESIGN, *bugs)
    assert not unnamed, (unnamed, verdict)
    assert "state --holds-never-lapse" in verdict, verdict  # the one difference, named where it explains a miss
    found = re.findall(r"witness of no_oversell on quota '[^']+': (\d+) operations \((\w+); ([\d,]+) in the window "
                       r"as found; .*?\); reproduced (\d+) of (\d+) tries", out.stdout)
    assert found, verdict
    for size, mode, before, again, tries in found:  # the properties' and the load's, when both caught it
        print(f"\nwitness of no_oversell: {before} operations as found -> {size} ({mode}), failed again {again} of {tries}")
    small = [i for i, (size, _, _, again, tries) in enumerate(found)
             if int(size) <= 10 and int(tries) == 10 and int(again) >= 1]
    assert small, found
    best = max(small, key=lambda i: int(found[i][3]))  # the one that failed again most often
    script = [line.split("replay: ")[1].strip() for line in out.stdout.splitlines()
              if "replay: " in line and "no_oversell.replay.py" in line][best]
    with stack(tmp_path_factory.mktemp("tickets-stack-fresh"), *flags) as fresh:
        started = time.monotonic()
        again_alone = subprocess.run([sys.executable, script, fresh], capture_output=True, text=True, timeout=120,
                                     cwd=tmp_path_factory.mktemp("elsewhere"))
        took = time.monotonic() - started
    assert again_alone.returncode == 1, again_alone.stdout + again_alone.stderr
    print(f"its script alone against a fresh shop: exit 1 in {took:.1f} s: " + again_alone.stdout.splitlines()[-1])
