"""The tickets reference core in virtual time: the design's promises, one by one."""

from __future__ import annotations

import pytest

from peakproof.clock import VirtualClock
from peakproof.targets.tickets import (Busy, Expired, IdempotencyKeyReused, InMemoryStore, InvalidRequest, SoldOut,
                             TicketsCore, UnknownQuota)
from peakproof.targets.tickets.core import READ, Wait


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def core(clock: VirtualClock) -> TicketsCore:
    c = TicketsCore(InMemoryStore(), clock)
    c.put_quota("q", 3, hold_seconds=10)
    return c


def test_once_sold_out_requests_are_refused_without_taking_the_lock(core: TicketsCore) -> None:
    core.reserve("q", "a", 2, "1")
    core.reserve("q", "b", 1, "2")
    taken = core.lock_acquisitions("q")
    for i in range(100):
        with pytest.raises(SoldOut):
            core.reserve("q", f"late-{i}", 1, f"x{i}")
    assert core.lock_acquisitions("q") == taken
    assert core.stats.fast_rejections == 100


def test_sold_out_reopens_as_soon_as_a_hold_expires(core: TicketsCore, clock: VirtualClock) -> None:
    core.reserve("q", "a", 3, "1")
    with pytest.raises(SoldOut):
        core.reserve("q", "b", 1, "2")
    clock.advance(10)  # exactly at expiry, before any supervisor ran
    res, created = core.reserve("q", "b", 1, "3")
    assert created and res.status == "held"
    assert core.get_quota("q").available == 2


def test_sold_out_reopens_when_a_hold_is_cancelled(core: TicketsCore) -> None:
    r, _ = core.reserve("q", "a", 3, "1")
    core.cancel(r.reservation_id)
    assert core.reserve("q", "b", 3, "2")[1] is True


def test_a_replay_returns_the_same_reservation_and_holds_nothing_more(core: TicketsCore) -> None:
    r1, created1 = core.reserve("q", "a", 2, "k")
    r2, created2 = core.reserve("q", "a", 2, "k")
    assert (created1, created2) == (True, False)
    assert r1.reservation_id == r2.reservation_id
    assert core.get_quota("q").held == 2


def test_a_replay_after_sell_out_still_returns_the_reservation(core: TicketsCore) -> None:
    r1, _ = core.reserve("q", "a", 3, "k")
    assert core.reserve("q", "a", 3, "k")[0].reservation_id == r1.reservation_id


def test_the_same_key_with_another_quantity_is_refused(core: TicketsCore) -> None:
    core.reserve("q", "a", 1, "k")
    with pytest.raises(IdempotencyKeyReused):
        core.reserve("q", "a", 2, "k")


def test_the_key_is_per_buyer(core: TicketsCore) -> None:
    assert core.reserve("q", "a", 1, "k")[1] and core.reserve("q", "b", 1, "k")[1]


def test_confirm_is_replay_safe_and_moves_units_from_held_to_sold(core: TicketsCore) -> None:
    r, _ = core.reserve("q", "a", 2, "1")
    core.confirm(r.reservation_id)
    assert core.confirm(r.reservation_id).status == "sold"
    q = core.get_quota("q")
    assert (q.available, q.held, q.sold) == (1, 0, 2)


def test_an_expired_hold_cannot_be_confirmed_and_its_units_return_once(core: TicketsCore,
                                                                        clock: VirtualClock) -> None:
    r, _ = core.reserve("q", "a", 2, "1")
    clock.advance(11)
    with pytest.raises(Expired):
        core.confirm(r.reservation_id)
    core.release_expired()
    core.release_expired()
    q = core.get_quota("q")
    assert (q.available, q.held, q.sold) == (3, 0, 0)
    assert core.get_reservation(r.reservation_id).status == "expired"


def test_cancelling_twice_returns_the_units_once(core: TicketsCore) -> None:
    r, _ = core.reserve("q", "a", 2, "1")
    core.confirm(r.reservation_id)
    core.cancel(r.reservation_id)
    core.cancel(r.reservation_id)
    q = core.get_quota("q")
    assert (q.available, q.held, q.sold) == (3, 0, 0)


def test_a_lock_holder_that_dies_blocks_sales_only_for_its_lease(core: TicketsCore, clock: VirtualClock) -> None:
    dead = core.reserve_steps("q", "dead", 1, "d")
    assert next(dead) == READ  # it took the lock, read the row, and then its process died
    blocked = core.reserve_steps("q", "b", 1, "2")
    assert isinstance(next(blocked), Wait)
    clock.advance(core.lease_seconds)
    assert next(blocked) == READ  # the lease ran out: the lock is taken over
    with pytest.raises(StopIteration):
        next(blocked)
    assert core._quotas["q"].lock.steals == 1
    # The dead holder wakes up late: its write is fenced off by the row version.
    with pytest.raises(Busy):
        next(dead)
    assert core.get_quota("q").held == 1


@pytest.mark.parametrize("bad", [0, -1, 11, 1.5, "2", True, None])
def test_bad_quantities_are_refused_with_the_range(core: TicketsCore, bad: object) -> None:
    with pytest.raises(InvalidRequest, match="quantity must be an integer from 1 to 10"):
        core.reserve("q", "a", bad, "1")  # type: ignore[arg-type]
    assert core.get_quota("q").available == 3


def test_an_unknown_quota_says_how_to_create_it(core: TicketsCore) -> None:
    with pytest.raises(UnknownQuota, match="PUT /quotas"):
        core.reserve("nope", "a", 1, "1")


def test_an_unknown_policy_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="pessimistic, optimistic, none"):
        TicketsCore(InMemoryStore(), VirtualClock(), policy="yolo")  # type: ignore[arg-type]


# -- the nemesis's hook: a lock holder that stalls or dies ---------------------------------------


def test_a_holder_armed_to_stall_yields_the_stall_between_its_read_and_its_write(core: TicketsCore) -> None:
    from peakproof.targets.tickets.core import Stall

    core.arm_fault("stall", 3.0)
    steps = core.reserve_steps("q", "a", 1, "1")
    assert next(steps) == READ
    stall = steps.send(None)
    assert isinstance(stall, Stall) and stall.seconds == 3.0
    with pytest.raises(StopIteration):
        steps.send(None)
    assert core.get_quota("q").held == 1  # nobody took the row meanwhile: its write stands


def test_a_holder_that_dies_writes_nothing_and_keeps_the_lock_until_its_lease_runs_out(
        core: TicketsCore, clock: VirtualClock) -> None:
    from peakproof.targets.tickets.core import HolderDied

    core.arm_fault("die")
    with pytest.raises(HolderDied):
        core.run(core.reserve_steps("q", "a", 1, "1"))
    assert core.get_quota("q").held == 0
    waiting = core.reserve_steps("q", "b", 1, "2")
    assert isinstance(next(waiting), Wait)  # the dead holder's lease is still running
    clock.advance(core.lease_seconds + 0.01)
    assert core.run(waiting)[0].quantity == 1  # type: ignore[index]


def test_a_stalled_holder_whose_lease_was_taken_over_is_fenced_off(core: TicketsCore, clock: VirtualClock) -> None:
    core.arm_fault("stall", 5.0)
    stalled = core.reserve_steps("q", "a", 2, "1")
    next(stalled), stalled.send(None)  # read, then stalls
    clock.advance(core.lease_seconds + 0.01)
    core.reserve("q", "b", 2, "2")  # takes the row over and writes
    with pytest.raises(Busy):
        stalled.send(None)  # its write would overwrite b's: refused, nothing written
    assert core.get_quota("q").held == 2


def test_a_fault_aimed_at_a_reservation_passes_over_a_confirm_and_stalls_the_next_reservation(
        core: TicketsCore) -> None:
    from peakproof.targets.tickets.core import Stall

    held, _ = core.reserve("q", "a", 1, "1")
    core.arm_fault("stall", 3.0, on="reserve")
    core.confirm(held.reservation_id)  # took the lock first: not stalled (in virtual time a stall is yielded)
    assert core.get_quota("q").sold == 1
    steps = core.reserve_steps("q", "b", 1, "2")
    assert next(steps) == READ
    stall = steps.send(None)
    assert isinstance(stall, Stall) and stall.seconds == 3.0
    with pytest.raises(InvalidRequest, match="reserve, confirm, cancel, expire"):
        core.arm_fault("stall", 1.0, on="refund")


def test_unknown_faults_and_bad_stalls_are_refused_with_what_was_expected(core: TicketsCore) -> None:
    with pytest.raises(InvalidRequest, match="stall, die"):
        core.arm_fault("explode")
    with pytest.raises(InvalidRequest, match=r"\(0, 60\]"):
        core.arm_fault("stall", -1)


def test_the_scheduler_lapses_time_for_workers_stuck_behind_a_dead_holder_and_says_when_nothing_frees_them() -> None:
    from peakproof.cases.tickets import interleaved_reservations
    from peakproof.interleave import Stuck, kill
    from peakproof.targets.tickets.core import LeaseLock

    sched, core = interleaved_reservations("pessimistic", 4, [1, 1, 1], 2, [0, kill(0)])
    assert core.get_quota("q").held == 2  # the dead worker's reservation never landed; the others did
    assert "worker 0 dies" in sched.render() and "time passes every lease" in sched.render()

    class NoLease(TicketsCore):
        def _state_for(self, row):  # type: ignore[no-untyped-def]
            qs = super()._state_for(row)
            qs.lock = type("Plain", (LeaseLock,), {"try_acquire": lambda self, o, now: LeaseLock.try_acquire(
                self, o, float("-inf") if self.held_by is not None else now)})(self.lease_seconds)
            return qs

    with pytest.raises(Stuck, match="dead: workers 0"):
        interleaved_reservations("pessimistic", 4, [1, 1, 1], 2, [0, kill(0)], make_core=NoLease)
