"""Quality: the tickets properties catch what they claim to catch.

Each test runs a property against a deliberately broken target and passes only if the
property fails, naming the right invariant. A property that cannot fail here would also
pass against a broken staging system.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis.stateful import run_state_machine_as_test

from peakproof.pytest_plugin import Target
from peakproof.cases.tickets.properties import TicketsMachine, contention, interleavings_hold
from peakproof.targets.tickets import InMemoryStore, LeaseLock, Reservation, TicketsCore
from peakproof.targets.tickets.core import Change, QuotaRow

from tests.support.search import failure_text, fixed_budget


def shrunk_failure(policy: str, only: tuple[str, ...]) -> tuple[tuple[int, list[int], int, list[int]], str]:
    """Run the interleaving property under ``policy``; return Hypothesis's shrunk case and its report."""
    failing: list[Any] = []

    # A fixed, derandomized search budget: the bug is found in every profile, every time.
    @fixed_budget(300)
    @given(case=contention())
    def prop(case: tuple[int, list[int], int, list[int]]) -> None:
        try:
            interleavings_hold(policy, case, only)
        except AssertionError:
            failing.append(case)
            raise

    with pytest.raises(AssertionError) as caught:
        prop()
    return failing[-1], failure_text(caught.value)  # Hypothesis replays the minimal example last


def test_the_interleaving_property_finds_an_oversell_without_locking_and_shrinks_it_to_two_buyers() -> None:
    (capacity, quantities, workers, schedule), report = shrunk_failure("none", ("no_oversell",))
    print(f"\nshrunk: capacity {capacity}, requests {quantities}, {workers} workers, schedule {schedule}\n{report}")
    assert "no_oversell: FAIL" in report
    assert len(quantities) == 2 and workers == 2, "the minimal oversell needs two buyers"
    assert len(schedule) <= 4, f"the schedule should shrink to a handful of steps; got {schedule}"
    assert "step 2: worker 1" in report  # the interleaving itself is printed


def test_the_interleaving_property_finds_a_valid_rejection_under_optimistic_locking() -> None:
    (capacity, quantities, workers, schedule), report = shrunk_failure("optimistic", ("no_valid_rejection",))
    print(f"\nshrunk: capacity {capacity}, requests {quantities}, {workers} workers, schedule {schedule}\n{report}")
    assert "no_valid_rejection: FAIL" in report
    assert "contention" in report
    assert workers == 2 and len(schedule) <= 12


def test_the_interleaving_property_holds_under_pessimistic_locking_for_the_shrunk_cases() -> None:
    # the very schedules that break the other policies are harmless under the chosen design
    for policy, check in (("none", "no_oversell"), ("optimistic", "no_valid_rejection")):
        case, _ = shrunk_failure(policy, (check,))
        interleavings_hold("pessimistic", case)


# -- broken targets for the state machine -------------------------------------------------------


# A fixed search budget, so whether a broken target is caught does not depend on the
# profile's example count or on luck (dev runs are not derandomized).
QUALITY_BUDGET = fixed_budget(400, stateful_step_count=30, shrink=False)


class LeakyCancel(TicketsCore):
    """Cancelling marks the reservation cancelled but never puts the units back."""

    def cancel(self, reservation_id: str) -> Reservation:
        res = self._reservation(reservation_id)
        if res.status in ("held", "sold"):
            row = self.store.read_quota(res.quota_id)
            self.store.apply(Change(replace(row, version=row.version + 1), None,
                                    transition=(reservation_id, res.status, "cancelled")))
        return self._reservation(reservation_id)


class DoubleReturn(TicketsCore):
    """A replayed cancel returns the units a second time."""

    def cancel(self, reservation_id: str) -> Reservation:
        res = self._reservation(reservation_id)
        if res.status == "cancelled":
            row = self.store.read_quota(res.quota_id)
            new = replace(row, available=row.available + res.quantity, version=row.version + 1)
            self.store.apply(Change(new, None))
            self._quotas[res.quota_id].available_hint = new.available
            return res
        return super().cancel(reservation_id)


class ForgetfulIdempotency(TicketsCore):
    """Ignores the request id: every retry opens a new reservation."""

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str) -> tuple[Reservation, bool]:
        self._n = getattr(self, "_n", 0) + 1
        return super().reserve(quota_id, buyer_id, quantity, f"{request_id}#{self._n}")


class SellsExpiredHolds(TicketsCore):
    """Confirm ignores the window: an expired hold is sold anyway."""

    def confirm(self, reservation_id: str) -> Reservation:
        res = self._reservation(reservation_id)
        if res.status in ("held", "expired"):
            row = self.store.read_quota(res.quota_id)
            source = {"held": "held", "expired": "available"}[res.status]
            new = replace(row, sold=row.sold + res.quantity, version=row.version + 1,
                          **{source: getattr(row, source) - res.quantity})
            self.store.apply(Change(new, None, transition=(reservation_id, res.status, "sold")))
            self._quotas[res.quota_id].available_hint = new.available
        return self._reservation(reservation_id)


class StaleSoldOut(TicketsCore):
    """The sold-out flag only ever goes down: returned units are never offered again."""

    def _publish(self, qs: Any, row: QuotaRow) -> None:
        if row.available < qs.available_hint:
            qs.available_hint, qs.hint_version = row.available, row.version


class OffByOne(TicketsCore):
    """Tests availability as ``available + 1 >= quantity``, on the fast path and under the lock."""

    def reserve_fast(self, quota_id: str, buyer_id: str, quantity: int, request_id: str) -> Reservation | None:
        qs = self._quotas.get(quota_id)
        if (qs is not None and self.store.find_by_key(quota_id, buyer_id, request_id) is None
                and qs.available_hint + 1 >= quantity):
            return None
        return super().reserve_fast(quota_id, buyer_id, quantity, request_id)

    def _mutate(self, quota_id: str, qs: Any, decide: Any, what: str) -> Any:
        def generous(row: QuotaRow, now: float) -> Change:
            change = decide(replace(row, available=row.available + 1), now)
            return replace(change, row=replace(change.row, available=change.row.available - 1))

        return super()._mutate(quota_id, qs, generous, what)


class ConfirmKeepsTheHold(TicketsCore):
    """A sale is added to sold, but its units stay counted as held: the counts stop adding up."""

    def confirm(self, reservation_id: str) -> Reservation:
        res = self._reservation(reservation_id)
        if res.status == "held" and res.expires_at > self.clock():
            row = self.store.read_quota(res.quota_id)
            new = replace(row, sold=row.sold + res.quantity, version=row.version + 1)
            self.store.apply(Change(new, None, transition=(reservation_id, "held", "sold")))
            return self._reservation(reservation_id)
        return super().confirm(reservation_id)


def broken_target(core_class: type[TicketsCore]) -> Target:
    """The tickets properties' target, with ``core_class`` in place of the reference core."""
    return Target("tickets", in_process_options={"core_factory": lambda clock: core_class(InMemoryStore(), clock)})


@pytest.mark.parametrize("broken, caught_by", [
    (LeakyCancel, "units_return_exactly_once"),
    (DoubleReturn, "units_return_exactly_once"),
    (ForgetfulIdempotency, "reservation_is_idempotent"),
    (SellsExpiredHolds, "expired_hold_is_never_sold"),
    (StaleSoldOut, "no_valid_rejection"),
    (OffByOne, "no_oversell"),
    (ConfirmKeepsTheHold, "stock_is_conserved"),
])
def test_the_state_machine_catches_a_broken_target(broken: type[TicketsCore], caught_by: str) -> None:
    class Machine(TicketsMachine):
        target = broken_target(broken)

    with pytest.raises((AssertionError, BaseExceptionGroup)) as caught:
        run_state_machine_as_test(Machine, settings=QUALITY_BUDGET)
    report = failure_text(caught.value)
    print(f"\n{broken.__name__}: {report[:600]}")
    assert f"{caught_by}: FAIL" in report, f"{broken.__name__} should fail {caught_by}; the report was:\n{report}"


def test_the_reference_target_passes_the_same_state_machine() -> None:
    class Machine(TicketsMachine):
        target = broken_target(TicketsCore)

    run_state_machine_as_test(Machine)


# -- broken lock holders: the lease and its fencing, under the nemesis ---------------------------


class UnfencedStore(InMemoryStore):
    """Writes without comparing the row version: a holder whose lease ran out still writes."""

    def apply(self, change: Change) -> str | None:
        return super().apply(replace(change, expected_version=None))


class LockWithoutLease(LeaseLock):
    """A plain lock: a holder that dies keeps it for ever."""

    def try_acquire(self, owner: object, now: float) -> bool:
        return super().try_acquire(owner, float("-inf") if self.held_by is not None else now)


class NoLeaseCore(TicketsCore):
    def _state_for(self, row: QuotaRow) -> Any:
        qs = super()._state_for(row)
        qs.lock = LockWithoutLease(self.lease_seconds)
        return qs


def unfenced_core(store: InMemoryStore, clock: Any, **kw: Any) -> TicketsCore:
    return TicketsCore(UnfencedStore(), clock, **kw)


def nemesis_failure(make_core: Any) -> str:
    """The lease-fault property (fixed budget) against ``make_core``; returns its failure report."""

    @fixed_budget(300, shrink=False)
    @given(case=contention(nemesis=True))
    def prop(case: tuple[int, list[int], int, list[Any]]) -> None:
        interleavings_hold("pessimistic", case, make_core=make_core)

    with pytest.raises(AssertionError) as caught:
        prop()
    return failure_text(caught.value)


def test_the_lease_property_catches_a_holder_that_writes_after_its_lease_ran_out() -> None:
    report = nemesis_failure(unfenced_core)
    print(f"\nunfenced: {report[:900]}")
    # the stalled holder's write overwrites the one made under the lease it lost: a lost update
    assert any(f"{name}: FAIL" in report for name in ("no_oversell", "stock_is_conserved", "units_return_exactly_once")), report
    assert "time passes every lease in force" in report  # the fault is in the printed interleaving


def test_the_lease_property_catches_a_lock_that_a_dead_holder_keeps_for_ever() -> None:
    report = nemesis_failure(NoLeaseCore)
    print(f"\nno lease: {report[:600]}")
    assert "sales_resume_after_a_dead_holder: FAIL" in report, report
    assert "dead: workers" in report


def test_the_reference_lease_keeps_every_promise_under_the_same_nemesis() -> None:
    @fixed_budget(300, shrink=False)
    @given(case=contention(nemesis=True))
    def prop(case: tuple[int, list[int], int, list[Any]]) -> None:
        interleavings_hold("pessimistic", case)

    prop()
