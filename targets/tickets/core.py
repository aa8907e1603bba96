"""The tickets reference core: a quota, holds, sales, expiry and cancellation.

Sans-I/O: the core starts no threads, never sleeps and never blocks; it is told the time
of day through an injected ``clock`` callable and persists through a ``store`` object
(:mod:`peakproof.targets.tickets.store`). Every mutation of the quota row is written as a generator
of *steps* (a :class:`Wait` when the lock is busy, :data:`READ` between reading the row
and writing it back, a :class:`Stall` when an injected fault holds the holder), and an
injected *runner* drives them:

* :func:`run_at_once` (the default): in virtual time nobody releases a lock while a caller
  waits, so a busy lock is :class:`Busy` at once and a stall takes no time;
* :class:`peakproof.targets.tickets.realtime.RealTimeRunner` (the served target's): waits for a busy
  lock and sleeps through a stall, in real time, with a bound;
* step by step under a chosen schedule (the harness's ``peakproof.interleave.Scheduler``),
  which is how a property test explores interleavings of concurrent buyers.

The two mutexes (the lock's test-and-set, the sold-out hint) keep it correct when an
adapter calls it from several threads; neither is ever held while waiting.

Locking policies (the seed's three disciplines, ``bilet/cekisme.mjs``):

* ``pessimistic`` (default, the chosen design): the decision is made under the quota
  row's lock, held as a *lease* so a holder that dies does not block sales forever; the
  write is fenced by the row version so a holder whose lease ran out cannot write.
* ``optimistic``: read, decide, compare-and-set on the row version; retry budget 3.
* ``none``: read, decide, blind write (the seed's unprotected discipline; oversells).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Generator, Literal, Protocol

from .._errors import ContractError, refusal

Policy = Literal["pessimistic", "optimistic", "none"]
POLICIES: tuple[str, ...] = ("pessimistic", "optimistic", "none")
Status = Literal["held", "sold", "expired", "cancelled"]

READ = "read"  # step: the row was read; the write comes at the next step
REREAD = "write lost a version race; read again"  # optimistic: a conflict, then a new read

DEFAULT_HOLD_SECONDS = 120.0  # BS4
DEFAULT_RETRY_BUDGET = 3  # BS8
DEFAULT_LEASE_SECONDS = 2.0
DEFAULT_MAX_PER_REQUEST = 10


class TicketError(ContractError):
    """A definite refusal. ``code`` is the contract's stable error code."""


InvalidRequest = refusal(TicketError, 400, "invalid_request")
UnknownQuota = refusal(TicketError, 404, "unknown_quota")
UnknownReservation = refusal(TicketError, 404, "unknown_reservation")
SoldOut = refusal(TicketError, 409, "sold_out")
Contention = refusal(TicketError, 409, "contention", "Optimistic retry budget exhausted: the buyer is turned away (the seed's 'red').")
Expired = refusal(TicketError, 409, "expired")
Cancelled = refusal(TicketError, 409, "cancelled")
IdempotencyKeyReused = refusal(TicketError, 422, "idempotency_key_reused")
Busy = refusal(TicketError, 503, "busy", "The lock could not be had in time, or a lease was lost mid-write. Nothing changed.")


class HolderDied(Busy):  # type: ignore[misc, valid-type]
    """The lock holder died between reading the row and writing it (an injected fault, or the
    process restarted under it): nothing was written, and the lock was *not* released; the
    next taker gets it when the lease runs out. Answered 503 busy, like any lost lease."""


FAULTS: tuple[str, ...] = ("stall", "die")  # what the next lock holder may be made to do (arm_fault)
# what a lock holder is doing: a fault may be aimed at one kind (arm_fault's ``on``)
WRITES: tuple[str, ...] = ("reserve", "confirm", "cancel", "expire")


@dataclass(frozen=True, slots=True)
class QuotaRow:
    quota_id: str
    capacity: int
    available: int
    held: int
    sold: int
    hold_seconds: float
    version: int = 0


@dataclass(frozen=True, slots=True)
class Reservation:
    reservation_id: str
    quota_id: str
    buyer_id: str
    request_id: str
    quantity: int
    status: Status
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class Change:
    """One atomic write: the new quota row plus reservation inserts or one transition.

    ``expected_version`` None means a blind write (policy ``none``). ``status_from`` makes
    the reservation transition conditional, so units return to stock exactly once.
    """

    row: QuotaRow
    expected_version: int | None
    inserts: tuple[Reservation, ...] = ()
    transition: tuple[str, Status, Status] | None = None  # (reservation id, from, to)
    expirations: tuple[str, ...] = ()  # reservation ids going held -> expired, all or none (the supervisor's batch)


class Store(Protocol):
    """Persistence for the core. ``apply`` is atomic: all of a Change or nothing."""

    def load_quotas(self) -> list[QuotaRow]: ...
    def load_held(self) -> list[Reservation]: ...
    def read_quota(self, quota_id: str) -> QuotaRow | None: ...
    def reset_quota(self, row: QuotaRow) -> None: ...
    def apply(self, change: Change) -> str | None:
        """None on success, else the reason: 'version', 'duplicate' or 'status'."""
        ...
    def get_reservation(self, reservation_id: str) -> Reservation | None: ...
    def find_by_key(self, quota_id: str, buyer_id: str, request_id: str) -> Reservation | None: ...


class Wait:
    """Step: the lock is held by someone else; nothing progressed."""

    __slots__ = ("lock",)

    def __init__(self, lock: "LeaseLock") -> None:
        self.lock = lock


class Stall:
    """Step: the holder stalls for ``seconds`` between its read and its write (an injected fault).

    The real-time runner sleeps; a scheduler in virtual time advances its clock instead."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class LeaseLock:
    """The quota row's lock, held as a lease with a fencing token.

    ``try_acquire`` is the only atomic primitive (a test-and-set, like a row lock in a
    database); a holder past its lease loses the lock to the next taker. Nothing here waits:
    ``on_release`` tells a real-time runner that a waiter may try again.
    """

    def __init__(self, lease_seconds: float, on_release: Callable[[], None] | None = None) -> None:
        self.lease_seconds = lease_seconds
        self.on_release = on_release
        self._mutex = threading.Lock()
        self._holder: object | None = None
        self._until = 0.0
        self.acquisitions = 0
        self.steals = 0  # acquisitions that took over an expired lease

    def try_acquire(self, owner: object, now: float) -> bool:
        with self._mutex:
            if self._holder is not None and self._holder is not owner and now < self._until:
                return False
            if self._holder is not None and self._holder is not owner:
                self.steals += 1
            self._holder, self._until = owner, now + self.lease_seconds
            self.acquisitions += 1
            return True

    def release(self, owner: object) -> None:
        with self._mutex:
            if self._holder is not owner:
                return
            self._holder = None
        if self.on_release is not None:
            self.on_release()

    @property
    def held_by(self) -> object | None:
        return self._holder


@dataclass
class _QuotaState:
    """Per-quota runtime state that never needs the row lock."""

    lock: LeaseLock
    capacity: int
    hold_seconds: float
    available_hint: int  # last committed 'available'; the sold-out fast path reads it
    hint_version: int
    expiries: list[tuple[float, str]] = field(default_factory=list)  # heap
    row_reads: int = 0  # how often the quota row itself was read


@dataclass
class Stats:
    fast_rejections: int = 0
    conflicts: int = 0
    wait_steps: int = 0


Steps = Generator["str | Wait | Stall", None, object]
Runner = Callable[[Steps], object]


def run_at_once(steps: Steps) -> object:
    """Run a step generator to completion without waiting (virtual time, one caller): a busy lock
    is refused with Busy at once (nobody can release it while this caller waits), and an injected
    stall takes no time (the injected clock is the caller's to advance)."""
    try:
        step = next(steps)
        while True:
            if isinstance(step, Wait):
                steps.close()
                raise Busy("the quota lock is held by another request; try again")
            step = steps.send(None)
    except StopIteration as stop:
        return stop.value


class TicketsCore:
    """The chosen design of Case T. Thread-safe when its store is."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], float],
        *,
        policy: Policy = "pessimistic",
        retry_budget: int = DEFAULT_RETRY_BUDGET,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_per_request: int = DEFAULT_MAX_PER_REQUEST,
        id_factory: Callable[[], str] | None = None,
        runner: Runner = run_at_once,
        on_release: Callable[[], None] | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        self.store = store
        self.clock = clock
        self.policy = policy
        self.retry_budget = retry_budget
        self.lease_seconds = lease_seconds
        self.run = runner  # drives every mutation's steps (the default never waits: see the module's notes)
        self.on_release = on_release  # told when a quota lock is released (a real-time runner's waiters)
        self.max_per_request = max_per_request
        self.stats = Stats()
        self._hint_mutex = threading.Lock()
        self._owners = itertools.count()
        self._new_id = id_factory or (lambda: uuid.uuid4().hex)
        self._quotas: dict[str, _QuotaState] = {}
        self._faults: list[tuple[str, float, str | None]] = []  # armed by arm_fault, taken by the next holder
        self._fault_mutex = threading.Lock()
        self.halted = False  # set by halt(): this core's process is gone, its writes must not land
        for row in store.load_quotas():
            self._quotas[row.quota_id] = self._state_for(row)
        for res in store.load_held():
            heapq.heappush(self._quotas[res.quota_id].expiries, (res.expires_at, res.reservation_id))

    # -- quotas ---------------------------------------------------------------------------

    def _state_for(self, row: QuotaRow) -> _QuotaState:
        return _QuotaState(LeaseLock(self.lease_seconds, self.on_release), row.capacity, row.hold_seconds,
                           row.available, row.version)

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = DEFAULT_HOLD_SECONDS) -> QuotaRow:
        """Create or reset a quota (admin). Drops its reservations."""
        _require_id("quota_id", quota_id)
        if not _is_int(capacity) or not 0 <= capacity <= MAX_CAPACITY:  # SQLite's INTEGER is 64 bits
            raise InvalidRequest(f"capacity must be an integer from 0 to {MAX_CAPACITY:,}; got {capacity!r:.40}")
        if not _is_number(hold_seconds) or not 0 < hold_seconds <= 86_400:
            raise InvalidRequest(f"hold_seconds must be a number in (0, 86400]; got {hold_seconds!r}")
        row = QuotaRow(quota_id, capacity, capacity, 0, 0, float(hold_seconds), 0)
        self.store.reset_quota(row)
        self._quotas[quota_id] = self._state_for(row)
        return row

    def get_quota(self, quota_id: str) -> QuotaRow:
        qs = self._state(quota_id)
        self._expire_due(quota_id, qs)
        row = self.store.read_quota(quota_id)
        assert row is not None
        return row

    def lock_acquisitions(self, quota_id: str) -> int:
        return self._state(quota_id).lock.acquisitions

    def row_reads(self, quota_id: str) -> int:
        return self._state(quota_id).row_reads

    def _state(self, quota_id: str) -> _QuotaState:
        qs = self._quotas.get(quota_id)
        if qs is None:
            raise UnknownQuota(f"no quota {quota_id!r}; create it with PUT /quotas/{{quota_id}}")
        return qs

    # -- reservations ----------------------------------------------------------------------

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str) -> tuple[Reservation, bool]:
        """Hold ``quantity`` units. Returns (reservation, created); created False = replay."""
        done = self.reserve_fast(quota_id, buyer_id, quantity, request_id)
        if done is not None:
            return done, False
        return self.run(self.reserve_steps(quota_id, buyer_id, quantity, request_id))  # type: ignore[return-value]

    def reserve_fast(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *,
                     may_block: bool = True) -> Reservation | None:
        """Everything decidable without the quota row: validation, replay, sold-out.

        Returns the replayed reservation, raises a TicketError, or returns None when the
        request needs the row (then run :meth:`reserve_steps`, or :meth:`reserve`). Cheap
        on purpose: this is the path of the ~196,429 requests that arrive after sell-out.
        With ``may_block=False`` (an event loop) it never takes the lock: when expired
        holds are due it returns None and the caller runs :meth:`reserve` on a thread.
        """
        # Exact type checks, not isinstance: this runs ~200,000 times in an opening.
        if type(quantity) is not int or not 1 <= quantity <= self.max_per_request:
            raise InvalidRequest(f"quantity must be an integer from 1 to {self.max_per_request}; got {quantity!r}")
        if type(buyer_id) is not str or not 0 < len(buyer_id) <= 200:
            _require_id("buyer_id", buyer_id)
        if type(request_id) is not str or not 0 < len(request_id) <= 200:
            _require_id("request_id", request_id)
        qs = self._quotas.get(quota_id)
        if qs is None:
            raise UnknownQuota(f"no quota {quota_id!r}; create it with PUT /quotas/{{quota_id}}")
        prior = self.store.find_by_key(quota_id, buyer_id, request_id)
        if prior is not None:
            if prior.quantity != quantity:
                raise IdempotencyKeyReused(
                    f"request_id {request_id!r} was used for quantity {prior.quantity}; got {quantity}. "
                    "Use a new request_id for a different request.")
            return prior
        if qs.available_hint < quantity:
            # A stale flag would be a valid rejection while stock remains: release holds
            # that are due first (a heap peek; the lock only when something is due).
            if _due(qs, self.clock()):
                if not may_block:
                    return None
                self._expire_due(quota_id, qs)
            if qs.available_hint < quantity:
                self.stats.fast_rejections += 1
                raise SoldOut(f"only {qs.available_hint} available; asked {quantity}", available=qs.available_hint)
        return None

    def reserve_steps(self, quota_id: str, buyer_id: str, quantity: int, request_id: str) -> Steps:
        qs = self._state(quota_id)

        def decide(row: QuotaRow, now: float) -> Change:
            if row.available < quantity:
                raise SoldOut(f"only {row.available} available; asked {quantity}", available=row.available)
            res = Reservation(self._new_id(), quota_id, buyer_id, request_id, quantity, "held",
                              now, now + row.hold_seconds)
            new = replace(row, available=row.available - quantity, held=row.held + quantity)
            return Change(new, None, inserts=(res,))

        change = yield from self._mutate(quota_id, qs, decide, "reserve")
        if change is None:  # lost the idempotency race to a concurrent replay
            prior = self.store.find_by_key(quota_id, buyer_id, request_id)
            assert prior is not None
            if prior.quantity != quantity:
                raise IdempotencyKeyReused(f"request_id {request_id!r} was used for quantity {prior.quantity}")
            return prior, False
        res = change.inserts[0]
        heapq.heappush(qs.expiries, (res.expires_at, res.reservation_id))
        return res, True

    def reserve_many(self, quota_id: str, requests: list[tuple[str, int, str]]) -> list[object]:
        """Decide a queue of reservations under one lock, one read and one write (group commit).

        The seed puts a queue in front of the quota row (queue-based load levelling); this
        drains it in batches, so the sell-out moment costs one transaction per batch, not
        one per buyer. Each entry of the result is (reservation, created) or a TicketError.
        Requests must have passed :meth:`reserve_fast`. Falls back to one at a time when a
        concurrent replay of the same key wins a race.
        """
        qs = self._state(quota_id)
        results: list[object] = [None] * len(requests)
        todo: list[int] = []
        seen: dict[tuple[str, str], int] = {}
        for i, (buyer, qty, rid) in enumerate(requests):
            prior = self.store.find_by_key(quota_id, buyer, rid)
            if prior is not None or (buyer, rid) in seen:
                continue  # a replay: answered after the batch
            seen[(buyer, rid)] = i
            todo.append(i)

        def decide(row: QuotaRow, now: float) -> Change:
            available, inserts = row.available, []
            for i in todo:
                buyer, qty, rid = requests[i]
                if available < qty:
                    results[i] = SoldOut(f"only {available} available; asked {qty}", available=available)
                    continue
                res = Reservation(self._new_id(), quota_id, buyer, rid, qty, "held", now, now + row.hold_seconds)
                available -= qty
                inserts.append(res)
                results[i] = (res, True)
            held = row.held + (row.available - available)
            return Change(replace(row, available=available, held=held), None, inserts=tuple(inserts))

        try:
            change = self.run(self._mutate(quota_id, qs, decide, "reserve"))
        except TicketError as e:
            return [e] * len(requests)
        if change is None:  # a duplicate key raced in: decide them one by one
            return [self._one(quota_id, *r) for r in requests]
        for res in change.inserts:  # type: ignore[union-attr]
            heapq.heappush(qs.expiries, (res.expires_at, res.reservation_id))
        for i, (buyer, qty, rid) in enumerate(requests):
            if results[i] is None:
                results[i] = self._one(quota_id, buyer, qty, rid)
        return results

    def _one(self, quota_id: str, buyer: str, qty: int, rid: str) -> object:
        try:
            return self.reserve(quota_id, buyer, qty, rid)
        except TicketError as e:
            return e

    def confirm(self, reservation_id: str) -> Reservation:
        """Turn a hold into a sale. Replay-safe: confirming a sale returns it."""
        res = self._reservation(reservation_id)
        if res.status == "sold":
            return res
        qs = self._state(res.quota_id)
        if res.status == "held" and res.expires_at <= self.clock():
            self._expire_due(res.quota_id, qs)  # the supervisor may be late; the window is not
            res = self._reservation(reservation_id)
        if res.status == "expired":
            raise Expired(f"reservation {reservation_id} expired at {res.expires_at}")
        if res.status == "cancelled":
            raise Cancelled(f"reservation {reservation_id} was cancelled")

        def decide(row: QuotaRow, now: float) -> Change:
            if now >= res.expires_at:  # decided under the lock: the window is the window
                raise Expired(f"reservation {reservation_id} expired at {res.expires_at}")
            new = replace(row, held=row.held - res.quantity, sold=row.sold + res.quantity)
            return Change(new, None, transition=(reservation_id, "held", "sold"))

        self.run(self._mutate(res.quota_id, qs, decide, "confirm"))
        return self.confirm(reservation_id)  # re-read: a lost transition race resolves here

    def cancel(self, reservation_id: str) -> Reservation:
        """Cancel a hold or a sale; its units return to stock exactly once. Replay-safe."""
        res = self._reservation(reservation_id)
        if res.status in ("cancelled", "expired"):
            if res.status == "expired":
                raise Expired(f"reservation {reservation_id} expired; nothing to cancel")
            return res
        qs = self._state(res.quota_id)
        was = res.status

        def decide(row: QuotaRow, now: float) -> Change:
            if was == "held":
                new = replace(row, held=row.held - res.quantity, available=row.available + res.quantity)
            else:
                new = replace(row, sold=row.sold - res.quantity, available=row.available + res.quantity)
            return Change(new, None, transition=(reservation_id, was, "cancelled"))

        self.run(self._mutate(res.quota_id, qs, decide, "cancel"))
        return self.cancel(reservation_id)

    def get_reservation(self, reservation_id: str) -> Reservation:
        res = self._reservation(reservation_id)
        if res.status == "held" and res.expires_at <= self.clock():
            self._expire_due(res.quota_id, self._state(res.quota_id))
            res = self._reservation(reservation_id)
        return res

    def _reservation(self, reservation_id: str) -> Reservation:
        if not isinstance(reservation_id, str) or not reservation_id:
            raise InvalidRequest("reservation id must be a non-empty string")
        res = self.store.get_reservation(reservation_id)
        if res is None:
            raise UnknownReservation(f"no reservation {reservation_id!r}")
        return res

    # -- the supervisor ---------------------------------------------------------------------

    def release_expired(self, now: float | None = None) -> int:
        """Release every hold whose window has passed. Returns the units released."""
        del now  # the core's clock is the authority; the parameter documents the call site
        total = 0
        for quota_id, qs in list(self._quotas.items()):
            total += self._expire_due(quota_id, qs)
        return total

    def next_expiry(self) -> float | None:
        heads = [qs.expiries[0][0] for qs in self._quotas.values() if qs.expiries]
        return min(heads) if heads else None

    def _expire_due(self, quota_id: str, qs: _QuotaState) -> int:
        """Release the due holds of a quota: in batches of one write each (a busy opening expires
        hundreds a second), one at a time when a batch lost a race with a confirm or a cancel."""
        released = 0
        while _due(qs, self.clock()):
            batch: list[tuple[float, str]] = []
            now = self.clock()
            while len(batch) < 512 and qs.expiries and qs.expiries[0][0] <= now:
                try:
                    batch.append(heapq.heappop(qs.expiries))
                except IndexError:  # another thread emptied it first
                    break
            held = [r for r in (self.store.get_reservation(rid) for _, rid in batch)
                    if r is not None and r.status == "held" and r.quota_id == quota_id]
            if not held:
                continue

            def decide_all(row: QuotaRow, now: float, held: list[Reservation] = held) -> Change:
                qty = sum(r.quantity for r in held)
                new = replace(row, held=row.held - qty, available=row.available + qty)
                return Change(new, None, expirations=tuple(r.reservation_id for r in held))

            try:
                if self.run(self._mutate(quota_id, qs, decide_all, "expire")) is not None:
                    released += sum(r.quantity for r in held)
                    continue
            except Busy:
                for item in batch:
                    heapq.heappush(qs.expiries, item)  # try again next round
                break
            for item in batch:  # one of them was confirmed or cancelled meanwhile: one by one
                heapq.heappush(qs.expiries, item)
            released += self._expire_one_by_one(quota_id, qs, len(batch))
        return released

    def _expire_one_by_one(self, quota_id: str, qs: _QuotaState, count: int) -> int:
        released = 0
        for _ in range(count):
            if not _due(qs, self.clock()):
                break
            try:
                _, rid = heapq.heappop(qs.expiries)
            except IndexError:  # another thread emptied it first
                break
            res = self.store.get_reservation(rid)
            if res is None or res.status != "held" or res.quota_id != quota_id:
                continue

            def decide(row: QuotaRow, now: float, res: Reservation = res) -> Change:
                new = replace(row, held=row.held - res.quantity, available=row.available + res.quantity)
                return Change(new, None, transition=(res.reservation_id, "held", "expired"))

            try:
                if self.run(self._mutate(quota_id, qs, decide, "expire")) is not None:
                    released += res.quantity
            except Busy:
                heapq.heappush(qs.expiries, (res.expires_at, rid))  # try again next round
                break
        return released

    # -- the nemesis: faults of the lock holder, injected on purpose ---------------------------

    def arm_fault(self, kind: str, seconds: float = 0.0, on: str | None = None) -> None:
        """Make the next holder of a quota row's lock ``stall`` for ``seconds`` between its read and
        its write, or ``die`` there (it never writes and never releases: the lease must free the
        row); ``on``: only the next holder doing that (one of :data:`WRITES`; None: whichever comes).
        Aimed at a reservation, a stall is overtaken by the buyers behind it whatever else was due
        (a confirm that took it writes a row no buyer's sale was read from). The harness's nemesis
        uses it through the reference's admin hook."""
        if kind not in FAULTS:
            raise InvalidRequest(f"fault must be one of {', '.join(FAULTS)}; got {kind!r:.60}")
        if kind == "stall" and not (_is_number(seconds) and 0 < seconds <= 60):
            raise InvalidRequest(f"a stall needs seconds in (0, 60]; got {seconds!r:.60}")
        if on is not None and on not in WRITES:
            raise InvalidRequest(f"'on' must be one of {', '.join(WRITES)} (or absent: the next holder, whatever "
                                 f"it does); got {on!r:.60}")
        with self._fault_mutex:
            self._faults.append((kind, float(seconds), on))

    def _take_fault(self, what: str) -> tuple[str, float] | None:
        if not self._faults:  # the common case: no lock, one list look
            return None
        with self._fault_mutex:
            for i, (kind, seconds, on) in enumerate(self._faults):
                if on is None or on == what:
                    del self._faults[i]
                    return kind, seconds
            return None

    def halt(self) -> None:
        """This core's process is gone (a restart): work still in flight dies before it writes."""
        self.halted = True

    # -- the policy: one place where the quota row is read and written -----------------------

    def _mutate(self, quota_id: str, qs: _QuotaState, decide: Callable[[QuotaRow, float], Change],
                what: str) -> Steps:
        """Read the row, decide, write it back, under the configured discipline.

        Yields a Wait while the lock is busy and READ (REREAD after a conflict) between read
        and write. Returns the
        applied Change, or None when a conditional part (duplicate key, reservation status)
        did not hold, in which case nothing was written.
        """
        owner = object() if self.policy == "pessimistic" else None
        if owner is not None:
            wait = Wait(qs.lock)
            while not qs.lock.try_acquire(owner, self.clock()):
                self.stats.wait_steps += 1
                yield wait
        died = False
        try:
            attempts = 0
            while True:
                attempts += 1
                row = self.store.read_quota(quota_id)
                qs.row_reads += 1
                if row is None:
                    raise UnknownQuota(f"quota {quota_id!r} was removed")
                yield READ if attempts == 1 else REREAD
                fault = self._take_fault(what)
                if fault is not None and fault[0] == "stall":
                    yield Stall(fault[1])
                if self.halted or (fault is not None and fault[0] == "die"):
                    died = True  # gone between read and write: no write, and the lock stays taken
                    raise HolderDied("the lock holder died before writing (restart or injected fault); "
                                     "nothing was written")
                change = decide(row, self.clock())
                fenced = self.policy != "none"  # pessimistic: the version is the fencing token
                change = replace(change, expected_version=row.version if fenced else None,
                                 row=replace(change.row, version=row.version + 1))
                failed = self.store.apply(change)
                if failed is None:
                    self._publish(qs, change.row)
                    return change
                if failed != "version":
                    return None
                self.stats.conflicts += 1
                if self.policy == "pessimistic":
                    raise Busy("the lock's lease ran out before the write; nothing was written")
                if attempts >= self.retry_budget:
                    raise Contention(
                        f"the quota row changed under this request {attempts} times "
                        f"(retry budget {self.retry_budget}); try again")
        finally:
            if owner is not None and not died:
                qs.lock.release(owner)

    def _publish(self, qs: _QuotaState, row: QuotaRow) -> None:
        # Only a newer version may move the hint, or a late writer could leave a stale
        # 'sold out' behind (a valid rejection while stock remains).
        with self._hint_mutex:
            if row.version > qs.hint_version or self.policy == "none":
                qs.available_hint, qs.hint_version = row.available, row.version


def _due(qs: _QuotaState, now: float) -> bool:
    try:
        return bool(qs.expiries) and qs.expiries[0][0] <= now
    except IndexError:  # emptied by another thread between the two looks
        return False


MAX_CAPACITY = 1_000_000_000  # the contract's maximum


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _require_id(name: str, value: object) -> None:
    if type(value) is not str or not 0 < len(value) <= 200:  # str subclasses would not round-trip
        raise InvalidRequest(f"{name} must be a string of 1 to 200 characters; got {value!r:.60}")
