"""The machine's other tenants, judged: when a neighbour's share of the CPU makes a latency miss or a
shortfall undecided (never the target's FAIL), from tenancies written out by hand (peakproof.tenants is pure
there). What /proc says of a real machine is measured in tests/e2e/test_tenants.py."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from peakproof.load.judge import RunRecord, shared_cores
from peakproof.spec import RunFacts, RunSpec
from peakproof.tenants import NEIGHBOUR_CORES, RUN_WAIT, WINDOW, Tenancy, Window, contention

LINUX = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="[platform] reads Linux's /proc")


def seconds(n: int, *, neighbours: float, waited: float, run: float = 0.5, target: float = 0.5) -> list[Window]:
    """``n`` one-second windows: the run and the target busy as given, others taking ``neighbours`` of a
    core, the run's threads waiting ``waited`` of each second for a CPU."""
    return [Window(1.0, run + target + neighbours, run, target, waited / 2, waited / 2) for _ in range(n)]


def test_a_neighbour_that_took_cpu_the_run_waited_for_is_named_with_its_share() -> None:
    t = Tenancy(2, seconds(10, neighbours=0.0, waited=0.0) + seconds(10, neighbours=0.95, waited=0.4))
    why = contention(t) or ""
    assert "0.95 of a core" in why and "waited for a CPU 40%" in why
    assert f"{t.share('neighbours'):.0%} of the machine's 2 core(s)" in why and "quiet machine" in why


def test_the_neighbour_is_named_by_its_busiest_processes_and_the_names_survive_the_report() -> None:
    t = Tenancy(2, seconds(20, neighbours=0.95, waited=0.4), outside={"yes": 18.9, "python3.11": 0.4, "sshd": 0.01})
    why = contention(t) or ""
    assert "(the busiest over the stage: yes 18.9 s, python3.11 0.4 s)" in why, why  # below 0.05 s: not named
    assert "the busiest: yes 18.9 s" in t.sentence(), t.sentence()
    assert Tenancy.from_json(t.to_json()).outside == t.outside


def test_a_neighbour_the_run_never_waited_for_and_waits_with_no_neighbour_decide_nothing() -> None:
    # an idle core's neighbour took nothing the run needed; a target's threads queueing behind each
    # other on a quiet machine is the target's own capacity, and stays its to answer for
    assert contention(Tenancy(2, seconds(20, neighbours=0.9, waited=RUN_WAIT / 2))) is None
    assert contention(Tenancy(2, seconds(20, neighbours=NEIGHBOUR_CORES / 2, waited=0.6))) is None
    assert contention(Tenancy(2, seconds(20, neighbours=NEIGHBOUR_CORES, waited=RUN_WAIT))) is not None


def test_a_target_on_the_cores_the_harness_ran_on_that_waited_for_a_cpu_is_not_judged_on_its_latency() -> None:
    # a loopback target peakproof could not pin: it ran on core 0 with the generator and waited 37% of the time
    def tenancy(target_cores: list[int], waited_target: float, stray: float = 0.0) -> Tenancy:
        windows = [Window(1.0, 0.8, 0.35, 0.45, 0.01, waited_target) for _ in range(20)]
        run = {0: 0.35 * 20, **({1: stray} if stray else {})}  # the generator pinned to 0; a stray wake-up on 1
        return Tenancy(2, windows, [(4242, "peakproof")], {"run": sorted(run), "target": target_cores},
                       core_seconds={"run": run, "target": {c: 9.0 / len(target_cores) for c in target_cores}})

    why = contention(tenancy([0, 1], 0.37)) or ""
    assert "the target ran on core(s) 0, where the harness's own processes ran too (0.35 of a core" in why, why
    assert "waited for a CPU 37%" in why and "taskset -c 1" in why, why
    # on a core of its own, its threads queueing behind each other are its own capacity: still its to answer for,
    # even when a thread of the run woke there once
    assert contention(tenancy([1], 0.37)) is None and contention(tenancy([1], 0.37, stray=0.01)) is None
    assert contention(tenancy([0, 1], RUN_WAIT / 2)) is None  # shared, but it never waited: decided
    back = Tenancy.from_json(tenancy([0, 1], 0.37).to_json())
    assert back.core_seconds == tenancy([0, 1], 0.37).core_seconds and contention(back) == why


def test_a_short_neighbour_is_judged_over_its_own_window_not_averaged_over_the_stage() -> None:
    quiet = seconds(100, neighbours=0.0, waited=0.0)
    t = Tenancy(2, quiet[:50] + seconds(int(WINDOW), neighbours=1.0, waited=0.5) + quiet[50:])
    assert t.share("neighbours") < NEIGHBOUR_CORES / 2  # averaged over the stage it would vanish
    assert contention(t) is not None and t.busiest().neighbours / t.busiest().span == pytest.approx(1.0)


def test_a_tenancy_comes_back_whole_from_its_json() -> None:
    t = Tenancy(2, seconds(3, neighbours=0.2, waited=0.1), [(12, "gunicorn")], {"target": [1], "run": [0]},
                {12: (0, 1)}, 8000, [12])
    back = Tenancy.from_json(t.to_json())
    assert back == t and back.sentence() == t.sentence() and "12 (gunicorn)" in back.target_sentence()


def test_the_judge_undecides_on_a_measured_neighbour_before_what_the_placement_said() -> None:
    busy = RunRecord(0.0, 20.0, 1, {}, tenancy=Tenancy(2, seconds(20, neighbours=1.0, waited=0.5)))
    quiet = RunRecord(0.0, 20.0, 1, {}, tenancy=Tenancy(2, seconds(20, neighbours=0.0, waited=0.5)))

    class Sc:
        host = "http://127.0.0.1:1/tickets"
        run = SimpleNamespace(facts=RunFacts(shared_cores=""))  # the placement said: not shared

    assert "processes outside the run took 1.00 of a core" in (shared_cores(Sc, busy) or "")
    assert shared_cores(Sc, quiet) is None
