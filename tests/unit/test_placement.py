"""Who uses the cores: the placement's arithmetic, and the verdicts when the target shared them."""

from __future__ import annotations

from peakproof.checks import CheckResult
from peakproof.offered import LoadCounters, LoadSettings, judge_offered_load, undecide_when_shared
from peakproof.placement import auto_processes, place
from peakproof.plan import Plan


def test_one_generator_beside_the_embedded_target_on_two_cores_gets_a_core_each() -> None:
    p = place(2, 1, "embedded", can_pin=True)
    assert not p.shared and p.shared_reason() is None
    assert p.generator_cores == (0,) and p.target_cores == (1,)
    assert "each its own" in p.sentence() and "pinned" in p.sentence()


def test_two_generators_beside_the_embedded_target_on_two_cores_share_them_and_say_so() -> None:
    p = place(2, 2, "embedded", can_pin=True)
    assert p.shared and p.busy == 3
    assert p.generator_cores == () and p.target_cores == ()  # nothing pinned: the scheduler shares them
    reason = p.shared_reason() or ""
    assert "2 core(s)" in reason and "2 generator processes" in reason and "--processes 1" in reason
    assert "INCONCLUSIVE, not FAIL" in p.sentence()


def test_the_provider_simulator_counts_as_a_busy_process_of_the_harness() -> None:
    p = place(2, 1, "embedded", ("the provider simulator",), can_pin=True)
    assert p.shared and "the provider simulator" in (p.shared_reason() or "")
    assert not place(4, 1, "embedded", ("the provider simulator",), can_pin=True).shared


def test_a_remote_target_never_shares_the_generators_cores() -> None:
    p = place(2, 8, "remote", can_pin=True)
    assert not p.shared and p.shared_reason() is None


def test_processes_auto_and_the_plan_leave_one_core_to_a_target_on_this_machine() -> None:
    assert auto_processes(2, target_local=True) == 1 and auto_processes(2, target_local=False) == 2
    assert auto_processes(1, target_local=True) == 1
    for cores, local in ((2, True), (2, False), (8, True)):
        plan = Plan("tickets", "tickets-opening", 20_000, 10_000, 0.5, cores, local, None, None)
        assert plan.processes_per_machine == auto_processes(cores, local)


HELD_BY_THE_TARGET = LoadCounters(due=10_000, sent=7_000, late=1_000, dropped=3_000, pool_full=40, late_by_pool=3_900)


def test_a_pool_held_by_a_target_that_shared_the_generators_cores_is_not_the_target_s_failure() -> None:
    planned = [i / 1000 for i in range(10_000)]
    alone = judge_offered_load(HELD_BY_THE_TARGET, planned, [], LoadSettings(calibrated_rate=2_000))
    assert alone.valid is False
    reason = place(2, 2, "embedded", can_pin=True).shared_reason()
    shared = judge_offered_load(HELD_BY_THE_TARGET, planned, [], LoadSettings(calibrated_rate=2_000,
                                                                             shared_cores=reason))
    assert shared.valid == "unknown" and reason in (shared.note or "") and "pool" in (shared.note or "")


def test_a_latency_miss_while_sharing_cores_is_undecided_and_an_invariant_broken_still_fails() -> None:
    slow = CheckResult("reserve p99 latency (intended)", False, {}, "Actual 923 ms / Limit 100 ms")
    oversold = CheckResult("no_oversell", False, {}, "sold 5,001 of 5,000")
    reason = "the target shared this machine's 2 core(s) with 2 generator processes"
    got = undecide_when_shared([slow, oversold], reason, {"reserve p99 latency (intended)"})
    assert got[0].valid == "unknown" and reason in (got[0].note or "") and "923 ms" in (got[0].note or "")
    assert got[1].valid is False
    assert undecide_when_shared([slow], None)[0].valid is False  # not shared: the miss is the target's


def test_a_miss_left_undecided_by_shared_cores_keeps_what_its_note_said() -> None:
    """A design statement's hint (peakproof.design) on a late post stays beside the neighbour that undecided it."""
    hint = "if your service brings nothing ..., state --follow-brings nothing: ...; otherwise this is a finding"
    late = CheckResult("posts_visible_within_window", False, {}, "post 7 seen 0.9 s late", note=hint)
    got = undecide_when_shared([late], "a neighbour took CPU the run needed", {"posts_visible_within_window"})[0]
    assert got.valid == "unknown" and "a neighbour took CPU" in (got.note or "") and hint in (got.note or "")
