"""Served mutants: the reference targets with exactly one promise broken, for the quality suite.

Each mutant patches the reference in its own process, then serves it with ``peakproof
serve`` (the same options), so the harness meets it over HTTP as it would a staging
service::

    python -m tests.support.mutants tickets-sells-expired-holds serve tickets --port 8000

A mutant breaks what a real service gets wrong: it answers the way the contract allows,
only the promise is broken. A *variant* (``*-http-semantics``, ``feed-epoch-times``) breaks
nothing: it answers as HTTP allows where the reference chose otherwise, and must pass.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any, Callable

from .stdlib_server import on_stdlib


def tickets_sells_expired_holds() -> None:
    """A confirm that arrives after the hold lapsed still answers 'sold' (the buyer who pays at
    minute 3 on a 2-minute hold)."""
    from peakproof.targets.tickets.core import Expired, TicketsCore

    original = TicketsCore.confirm

    def confirm(self: TicketsCore, reservation_id: str) -> Any:
        try:
            return original(self, reservation_id)
        except Expired:
            return replace(self._reservation(reservation_id), status="sold")

    TicketsCore.confirm = confirm  # type: ignore[method-assign]


def tickets_500_on_every_reservation() -> None:
    """Validates and decides each reservation, then answers 500 'database unavailable'."""
    _break_responses(lambda method, path: method == "POST" and path.endswith("/reservations"))


def tickets_accepts_nonpositive_quantity() -> None:
    """A quantity of 0 or less passes validation: a "reservation" of -1 adds a unit to the stock."""
    from peakproof.targets.tickets.core import TicketsCore

    original = TicketsCore.reserve_fast

    def reserve_fast(self: TicketsCore, quota_id: str, buyer_id: str, quantity: int, request_id: str,
                     **kw: Any) -> Any:
        if type(quantity) is int and quantity < 1 and quota_id in self._quotas:
            return None  # "valid": on to the quota row, which holds what it is asked
        return original(self, quota_id, buyer_id, quantity, request_id, **kw)

    TicketsCore.reserve_fast = reserve_fast  # type: ignore[method-assign]


def tickets_refuses_long_buyer_ids() -> None:
    """Buyer ids longer than 64 characters are refused (a VARCHAR(64) column), though the contract
    allows up to 200: a schema-valid request gets a 400."""
    from peakproof.targets.tickets.core import InvalidRequest, TicketsCore

    original = TicketsCore.reserve_fast

    def reserve_fast(self: TicketsCore, quota_id: str, buyer_id: str, quantity: int, request_id: str,
                     **kw: Any) -> Any:
        if isinstance(buyer_id, str) and len(buyer_id) > 64:
            raise InvalidRequest(f"buyer_id must be at most 64 characters; got {len(buyer_id)}")
        return original(self, quota_id, buyer_id, quantity, request_id, **kw)

    TicketsCore.reserve_fast = reserve_fast  # type: ignore[method-assign]


def tickets_keys_on_request_id_alone() -> None:
    """Idempotency keyed on (quota, request id), not the buyer too: a second buyer whose app numbers
    its requests like the first's gets the first buyer's reservation back."""
    from peakproof.targets.tickets.store import SqliteStore

    def find_by_key(self: SqliteStore, quota_id: str, buyer_id: str, request_id: str) -> Any:
        r = next((r for (q, _b, rid), r in list(self._keys.items()) if q == quota_id and rid == request_id), None)
        return None if r is None else (self.get_reservation(r.reservation_id) or r)

    SqliteStore.find_by_key = find_by_key  # type: ignore[method-assign]


def tickets_releases_holds_early() -> None:
    """Releases each hold at a quarter of its window (a sweeper with the wrong unit), while every
    answer announces the window it was given: a buyer who pays in time is told the hold expired."""
    from dataclasses import replace as _replace

    from peakproof.targets.tickets import app
    from peakproof.targets.tickets.core import TicketsCore

    put_quota, reservation_json, quota_json = TicketsCore.put_quota, app.reservation_json, app._quota_json

    def quarter(self: TicketsCore, quota_id: str, capacity: int, hold_seconds: float = 120.0) -> Any:
        return put_quota(self, quota_id, capacity, hold_seconds / 4 if isinstance(hold_seconds, (int, float))
                         and not isinstance(hold_seconds, bool) and hold_seconds > 0 else hold_seconds)

    def announced(r: Any) -> dict[str, Any]:
        return reservation_json(_replace(r, expires_at=r.created_at + 4 * (r.expires_at - r.created_at)))

    TicketsCore.put_quota = quarter  # type: ignore[method-assign]
    app.reservation_json = announced
    app._quota_json = lambda row: {**quota_json(row), "hold_seconds": row.hold_seconds * 4}


def tickets_holds_never_lapse() -> None:
    """A design, not a bug: a hold lasts until it is paid or cancelled. Whatever window a quota asks for, its
    holds say they expire a day on (the reference's longest window; a real shop's driver said ten years), far
    past any run, and they do not lapse before."""
    from peakproof.targets.tickets import app
    from peakproof.targets.tickets.core import TicketsCore

    put_quota, quota_json = TicketsCore.put_quota, app._quota_json
    ten_years = 86_400.0  # the reference's longest window: far past any run

    def forever(self: TicketsCore, quota_id: str, capacity: int, hold_seconds: float = 120.0) -> Any:
        return put_quota(self, quota_id, capacity, ten_years)

    TicketsCore.put_quota = forever  # type: ignore[method-assign]
    app._quota_json = lambda row: {**quota_json(row), "hold_seconds": ten_years}


def tickets_unfenced_lease() -> None:
    """The quota row's write is not fenced: a holder that stalled past its lease still writes,
    over the write of the holder that took the row after it (a lost update)."""
    from peakproof.targets.tickets.store import SqliteStore

    original = SqliteStore.apply

    def apply(self: SqliteStore, change: Any) -> Any:
        return original(self, replace(change, expected_version=None))

    SqliteStore.apply = apply  # type: ignore[method-assign]


def tickets_lock_without_lease() -> None:
    """A plain lock where the design has a lease: a holder that dies keeps the row for ever."""
    from peakproof.targets.tickets.core import LeaseLock

    original = LeaseLock.try_acquire

    def try_acquire(self: LeaseLock, owner: object, now: float) -> bool:
        return original(self, owner, float("-inf") if self.held_by is not None else now)

    LeaseLock.try_acquire = try_acquire  # type: ignore[method-assign]


def tickets_500_on_some_granted_holds() -> None:
    """Makes each hold, then answers 500 to 30% of the reservations it granted (the commit went
    through, the answer did not: a PostgreSQL-backed shop that fails after its write). Everything
    else answers as the reference does."""
    _break_responses(lambda method, path: method == "POST" and path.endswith("/reservations"), 0.3,
                     only_status=(200, 201))


def _break_responses(hit: Callable[[str, str], bool], share: float = 1.0,
                     only_status: tuple[int, ...] | None = None) -> None:
    """Requests ``hit`` accepts get a 500 instead of the answer (a ``share`` of them; with
    ``only_status``, a share of those the reference answered with one of these statuses)."""
    import random

    from peakproof.targets.tickets.app import TicketsApp

    original = TicketsApp.__call__
    rnd = random.Random(7)

    async def call(self: TicketsApp, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not hit(scope["method"], scope["path"]) or (
                only_status is None and rnd.random() >= share):
            return await original(self, scope, receive, send)
        passing = False

        async def swallow(message: dict) -> None:  # the target did the work; the answer is a 500
            nonlocal passing
            if only_status is not None and message["type"] == "http.response.start" and (
                    message["status"] not in only_status or rnd.random() >= share):
                passing = True
            if passing:
                await send(message)
            elif message["type"] == "http.response.start":
                body = json.dumps({"error": "database_unavailable", "message": "database unavailable"}).encode()
                await send({"type": "http.response.start", "status": 500,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})

        await original(self, scope, receive, swallow)

    TicketsApp.__call__ = call  # type: ignore[method-assign]


def feed_ignores_unfollows() -> None:
    """Answers 200 to an unfollow and keeps the follow (the old author keeps showing up)."""
    from peakproof.targets.feed.core import FeedCore

    FeedCore.unfollow = lambda self, user, followee: None  # type: ignore[method-assign]


def feed_its_own_design() -> None:
    """A design, not a bug (a Mastodon-like home timeline, pure fan-out on write): an unfollow answers at once
    and a worker applies it 0.4 s later, taking the author's posts out of the timeline; a follow brings none of
    the followee's earlier posts in; the reader's own posts are in their home timeline. Stated: --unfollow-lag
    0.5 --follow-brings nothing --own-posts."""
    import threading

    from peakproof.targets.feed.core import FeedCore

    unfollow, follow_many, read_view = FeedCore.unfollow, FeedCore.follow_many, FeedCore.read_view

    follows: dict[tuple[str, str], int] = {}  # each pair's follows so far: a worker applies writes in order

    def lagging_unfollow(self: FeedCore, user: str, followee: str) -> None:
        unfollow(self, user, user)  # its arguments checked now (a self-unfollow changes nothing), applied later
        seen = follows.get((user, followee), 0)

        def apply() -> None:
            with self._mutex:
                if follows.get((user, followee), 0) == seen:  # a follow after it was applied after it
                    unfollow(self, user, followee)
                    inbox = self.inboxes.get(user, [])  # the author's posts leave the timeline for good
                    inbox[:] = [k for k in inbox if self.posts[k[1]].author_id != followee]

        timer = threading.Timer(0.4, apply)
        timer.daemon = True
        timer.start()

    def no_backfill(self: FeedCore, pairs: list[tuple[str, str]]) -> int:
        with self._mutex:  # the fan-out consumers write under it too: none writes while it is set aside
            for pair in pairs:
                follows[pair] = follows.get(pair, 0) + 1
            self._write = lambda user, key: None  # type: ignore[method-assign]  # the backfill's only writes
            try:
                return follow_many(self, pairs)
            finally:
                del self._write

    def with_own_posts(self: FeedCore, user: str, limit: int = 20, cursor: Any = None) -> Any:
        items, nxt, how = read_view(self, user, limit, cursor)
        bound = cursor if cursor is not None else (float("inf"), "")
        with self._mutex:
            mine = [self.posts[k[1]] for k in reversed(self.by_author.get(user, []))
                    if k < bound and k[1] not in self.deleted][:limit]
        merged = sorted({p.post_id: p for p in [*items, *mine]}.values(), key=lambda p: p.key, reverse=True)[:limit]
        return merged, (merged[-1].key if len(merged) == limit else None), how

    def push_only(self: FeedCore, threshold: int) -> None:  # every post fanned out on write: none merged on read
        self.threshold = 1 << 62

    FeedCore.set_threshold = push_only  # type: ignore[method-assign]
    FeedCore.unfollow = lagging_unfollow  # type: ignore[method-assign]
    FeedCore.follow_many = no_backfill  # type: ignore[method-assign]
    FeedCore.read_view = with_own_posts  # type: ignore[method-assign]


def feed_delete_lost_to_fanout() -> None:
    """A delete that comes within a second of its post's publish answers 200, and the fan-out worker, running
    behind, writes the post back over the deletion: it stays readable in its followers' timelines."""
    import threading

    from peakproof.targets.feed.core import FeedCore

    delete = FeedCore.delete

    def lost(self: FeedCore, post_id: str) -> Any:
        post = delete(self, post_id)
        age = self.clock() - post.created_at
        if age < 1.0:  # the worker had not reached it yet: it writes the post back when it does
            timer = threading.Timer(max(0.0, 0.3 - age), lambda: self.deleted.discard(post_id))
            timer.daemon = True
            timer.start()
        return post

    FeedCore.delete = lost  # type: ignore[method-assign]


def feed_skips_a_post_at_each_page_boundary() -> None:
    """The page after a cursor leaves out its first post (an off-by-one in the cursor)."""
    from peakproof.targets.feed.core import FeedCore

    original = FeedCore.read_view

    def read_view(self: FeedCore, user: str, limit: int = 20, cursor: Any = None) -> Any:
        if cursor is None:
            return original(self, user, limit, cursor)
        items, nxt, how = original(self, user, limit + 1, cursor)
        items = items[1:]
        return items, (nxt if len(items) >= limit else None), how

    FeedCore.read_view = read_view  # type: ignore[method-assign]


def feed_fanout_stalls() -> None:
    """The fan-out consumers never start: only the merged (above-threshold) authors ever show."""
    from peakproof.targets.feed.app import FanoutConsumers

    FanoutConsumers.start = lambda self: self  # type: ignore[method-assign]


def notifications_new_key_per_call() -> None:
    """Every call of a notification gets a fresh idempotency key, retries after a lost answer too:
    the provider cannot tell the retry from a new message and delivers twice."""
    from dataclasses import replace as _replace

    from peakproof.targets.notifications.core import NotificationsCore

    original = NotificationsCore._call

    def call(self: NotificationsCore, n: Any, channel: str, now: float) -> Any:
        c = original(self, n, channel, now)
        return _replace(c, idempotency_key=f"{c.idempotency_key}-{c.call_no}")

    NotificationsCore._call = call  # type: ignore[method-assign]


def notifications_retries_a_dead_channel() -> None:
    """After a permanent failure ("bad address") the next round tries the same channel again."""
    from peakproof.targets.notifications.core import NotificationsCore

    original = NotificationsCore._plan

    def plan(self: NotificationsCore, n: Any, now: float) -> Any:
        if n.attempts and n.attempts[-1].outcome == "permanent" and len(n.attempts) < self.budget:
            return [n.attempts[-1].channel]  # "maybe it works this time"
        return original(self, n, now)

    NotificationsCore._plan = plan  # type: ignore[method-assign]


def notifications_budget_of_six() -> None:
    """Spends up to 6 provider calls on a notification instead of the budget of 3 (BI8)."""
    from peakproof.targets.notifications.core import NotificationsCore

    original = NotificationsCore.__init__

    def init(self: NotificationsCore, *args: Any, **kw: Any) -> None:
        original(self, *args, **{**kw, "budget": 6})

    NotificationsCore.__init__ = init  # type: ignore[method-assign]


def notifications_resends_replays() -> None:
    """A replay of (event, recipient) answers with the first notification, as the contract says, but
    is queued again as a message of its own (its own idempotency key): the recipient hears twice."""
    from dataclasses import replace as _replace

    from peakproof.targets.notifications.core import Notification, NotificationsCore

    accept, call = NotificationsCore.accept, NotificationsCore._call

    def accept_again(self: NotificationsCore, event_id: str, recipient_id: str, *args: Any) -> Any:
        n, created = accept(self, event_id, recipient_id, *args)
        if not created:  # "a new request is a new message"
            copy, _ = accept(self, f"{event_id}#replay{self._new_id()[:6]}", recipient_id, *args)
            assert isinstance(copy, Notification)
        return n, created

    def same_event(self: NotificationsCore, n: Any, channel: str, now: float) -> Any:
        c = call(self, n, channel, now)
        return _replace(c, event_id=c.event_id.split("#replay")[0])  # the provider sees the same event

    NotificationsCore.accept = accept_again  # type: ignore[method-assign]
    NotificationsCore._call = same_event  # type: ignore[method-assign]


def notifications_ignores_preference() -> None:
    """The cascade always starts at push, then SMS, then e-mail, whatever the recipient prefers."""
    from peakproof.targets.notifications.core import CHANNELS, Recipient
    from peakproof.targets.notifications.store import GroupCommitStore, SqliteStore

    for store in (GroupCommitStore, SqliteStore):
        def fixed_order(self: Any, recipient_id: str, load: Any = store.load_recipient) -> Any:
            r = load(self, recipient_id)
            return r and Recipient(r.recipient_id, tuple(c for c in CHANNELS if c in r.channels), r.addresses)

        store.load_recipient = fixed_order  # type: ignore[method-assign]


def notifications_claims_delivered() -> None:
    """A provider's 503 ("unavailable, try again") is taken for a delivery: the status says
    delivered, no provider delivered it, and it is never retried."""
    from peakproof.targets.notifications.core import NotificationsCore

    complete = NotificationsCore.complete

    def optimistic(self: NotificationsCore, call: Any, outcome: str, now: float | None = None) -> Any:
        return complete(self, call, "ok" if outcome == "transient" else outcome, now)  # type: ignore[arg-type]

    NotificationsCore.complete = optimistic  # type: ignore[method-assign]


def notifications_breaker_counts_permanent() -> None:
    """The breaker counts a dead address's permanent failures as the channel's: a few bad numbers
    open SMS for everyone."""
    from peakproof.targets.notifications.core import Breaker

    record = Breaker.record

    def counts_everything(self: Breaker, outcome: str, now: float) -> None:
        record(self, "transient" if outcome == "permanent" else outcome, now)

    Breaker.record = counts_everything  # type: ignore[method-assign]


def notifications_one_fifo() -> None:
    """One queue for every priority, first come first served: an urgent code waits behind every
    reminder accepted before it."""
    import heapq

    from peakproof.targets.notifications.core import NotificationsCore

    def enqueue(self: NotificationsCore, n: Any, due: float) -> None:
        heapq.heappush(self._queues["reminder"], (due, next(self._seq), n.notification_id))

    NotificationsCore._enqueue = enqueue  # type: ignore[method-assign]


def notifications_dedups_on_event_alone() -> None:
    """Deduplicates on the event id alone: the same event sent to a second recipient (a broadcast)
    answers with the first recipient's notification, and the second recipient is never notified."""
    from peakproof.targets.notifications.store import GroupCommitStore, InMemoryStore

    for cls in (GroupCommitStore, InMemoryStore):
        def insert_if_absent(self: Any, n: Any, _original: Any = cls.insert_if_absent) -> Any:
            first = next((nid for (event, _), nid in list(self._by_key.items()) if event == n.event_id), None)
            return self.load(first) if first is not None else _original(self, n)

        cls.insert_if_absent = insert_if_absent  # type: ignore[method-assign]


def http_semantics(times: str = "rfc3339") -> Callable[[], None]:
    """Not a mutant: a variant that keeps every promise and answers the way HTTP allows where the
    reference chose otherwise: 201 Created to a PUT, 204 No Content (no body) to a DELETE, an
    extra field the contract does not name in every JSON object, and times as RFC 3339 (the
    contracts' convention) or as epoch seconds (``times="epoch"``). A harness must pass it."""

    def patch() -> None:
        from peakproof.targets._asgi import AsgiApp

        original = AsgiApp.__call__

        async def call(self: AsgiApp, scope: dict, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await original(self, scope, receive, send)
            method = scope["method"]
            start: dict[str, Any] = {}

            async def rewrite(message: dict) -> None:
                if message["type"] == "http.response.start":
                    start.update(message)
                    return
                status, body = start["status"], message.get("body", b"")
                if 200 <= status < 300 and method == "DELETE":
                    status, body = 204, b""
                elif 200 <= status < 300:
                    if method == "PUT":
                        status = 201
                    body = _rewrite_json(body, times)
                headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
                await send({"type": "http.response.start", "status": status,
                            "headers": headers + [(b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})

            await original(self, scope, receive, rewrite)

        AsgiApp.__call__ = call  # type: ignore[method-assign]

    return patch


TIME_FIELDS = ("created_at", "expires_at", "accepted_at", "delivered_at", "at")


def _rewrite_json(body: bytes, times: str) -> bytes:
    from datetime import datetime

    try:
        doc = json.loads(body)
    except ValueError:
        return body

    def walk(o: Any) -> Any:
        if isinstance(o, dict):
            out = {k: walk(v) for k, v in o.items()}
            for k in TIME_FIELDS:
                if isinstance(out.get(k), str) and times == "epoch":
                    out[k] = datetime.fromisoformat(out[k].replace("Z", "+00:00")).timestamp()
            out["x_served_by"] = "an http-semantics variant"  # a field no contract names: ignore it
            return out
        if isinstance(o, list):
            return [walk(v) for v in o]
        return o

    return json.dumps(walk(doc)).encode()


def tickets_expiry_job() -> None:
    """A shop's periodic expiry job: lapsed holds are released by a job that runs once a second, and a
    confirm sells any hold still marked held, lapsed or not, until the job has run (the answers depend
    on time as a real shop's do; the bug: a hold sold after the expiry the shop itself announced)."""
    from dataclasses import replace as _replace

    from peakproof.targets.tickets.app import Supervisor
    from peakproof.targets.tickets.core import Cancelled, Change, Expired, QuotaRow, TicketsCore

    def confirm(self: TicketsCore, reservation_id: str) -> Any:
        res = self._reservation(reservation_id)
        if res.status == "sold":
            return res
        if res.status == "expired":
            raise Expired(f"reservation {reservation_id} expired at {res.expires_at}")
        if res.status == "cancelled":
            raise Cancelled(f"reservation {reservation_id} was cancelled")

        def decide(row: QuotaRow, now: float) -> Change:  # no look at the clock: the job's business
            new = _replace(row, held=row.held - res.quantity, sold=row.sold + res.quantity)
            return Change(new, None, transition=(reservation_id, "held", "sold"))

        self.run(self._mutate(res.quota_id, self._state(res.quota_id), decide, "confirm"))
        return self._reservation(reservation_id)

    TicketsCore.confirm = confirm  # type: ignore[method-assign]
    TicketsCore.get_reservation = TicketsCore._reservation  # type: ignore[method-assign]  # status as stored
    original = Supervisor.__init__

    def every_second(self: Supervisor, core: Any, interval: float = 0.1, health: Any = None) -> None:
        original(self, core, 1.0, health)

    Supervisor.__init__ = every_second  # type: ignore[method-assign]


def tickets_returns_lapsed_units_late() -> None:
    """A lapsed hold's units come back 10 s after the release lag the harness assumes when none is
    stated (UNSTATED_RETURN_LAG): the expiry job sees each hold's expiry that much later. Nothing else is
    wrong: a confirm after the expiry is still refused."""
    import heapq as _heapq

    import peakproof.targets.tickets.core as core
    from peakproof.cases.tickets.rules import UNSTATED_RETURN_LAG

    late = UNSTATED_RETURN_LAG + 10.0
    shifted: dict[str, float] = {}

    class LateHeap:  # the core's heapq, with every hold's place in the expiry queue pushed back once
        def __getattr__(self, name: str) -> Any:
            return getattr(_heapq, name)

        def heappush(self, heap: list, item: tuple[float, str]) -> None:
            at, rid = item
            _heapq.heappush(heap, (max(at, shifted.setdefault(rid, at + late)), rid))

    core.heapq = LateHeap()  # type: ignore[assignment]


def notifications_breaker_never_opens() -> None:
    """The breaker never opens: whatever a channel's failures, the cascade keeps calling it first."""
    from peakproof.targets.notifications.core import Breaker

    Breaker._open = lambda self, now: None  # type: ignore[method-assign]


def tickets_one_reservation_for_two_request_ids() -> None:
    """A reservation cache keyed on (quota, buyer) alone: a buyer's second request id, within the
    hold, gets the first request's reservation back (one reservation answering two request ids)."""
    from peakproof.targets.tickets.core import TicketsCore

    original = TicketsCore.reserve_fast

    def reserve_fast(self: TicketsCore, quota_id: str, buyer_id: str, quantity: int, request_id: str,
                     **kw: Any) -> Any:
        for (q, b, _rid), held in list(getattr(self.store, "_keys", {}).items()):
            if q == quota_id and b == buyer_id and type(quantity) is int:
                current = self.store.get_reservation(held if isinstance(held, str) else held.reservation_id)
                if current is not None and current.status == "held" and current.quantity == quantity:
                    return current  # "the buyer already holds these": another request id's reservation
        return original(self, quota_id, buyer_id, quantity, request_id, **kw)

    TicketsCore.reserve_fast = reserve_fast  # type: ignore[method-assign]


def tickets_checks_echo() -> None:
    """Not a mutant: the reference, counting whether each reservation's ``X-Peakproof-Echo`` header
    names the buyer and request id of its own body (``tests/support/echo.py``); ``GET <base>/_echo``
    answers the counts: right, stale (another request's value), missing."""
    from peakproof.targets.tickets.app import TicketsApp

    original = TicketsApp.__call__
    counts = {"right": 0, "stale": 0, "missing": 0}
    stale: list[str] = []

    async def call(self: TicketsApp, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await original(self, scope, receive, send)
        if scope["method"] == "GET" and scope["path"].endswith("/_echo"):
            body = json.dumps({**counts, "examples": stale[:5]}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if not (scope["method"] == "POST" and scope["path"].endswith("/reservations")):
            return await original(self, scope, receive, send)
        messages, more = [], True
        while more:
            messages.append(await receive())
            more = messages[-1].get("more_body", False)
        try:
            doc = json.loads(b"".join(m.get("body", b"") for m in messages))
            want = f"{doc['buyer_id']} {doc['request_id']}"
        except (ValueError, KeyError, TypeError):
            want = None
        got = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-peakproof-echo"), None)
        if want is not None:
            if got is None:
                counts["missing"] += 1
            elif got == want:
                counts["right"] += 1
            else:
                counts["stale"] += 1
                stale.append(f"body {want!r}, header {got!r}")
        replay = iter(messages)

        async def again() -> dict:
            return next(replay, {"type": "http.disconnect"})

        await original(self, scope, again, send)

    TicketsApp.__call__ = call  # type: ignore[method-assign]


def feed_405_without_allow() -> None:
    """A 405 that does not say which methods the resource supports (RFC 9110 requires ``Allow``)."""
    import peakproof.targets._asgi as asgi

    original = asgi.HttpError.__init__

    def init(self: Any, status: int, code: str, message: str, headers: Any = None) -> None:
        original(self, status, code, message, None)

    asgi.HttpError.__init__ = init  # type: ignore[method-assign]


def notifications_unhashable_channel_is_a_500() -> None:
    """A channel list with an object in it ({}) crashes the validation: a 500 where a 400 is due."""
    from peakproof.targets.notifications.core import NotificationsCore

    original = NotificationsCore.put_recipient

    def put_recipient(self: NotificationsCore, recipient_id: str, channels: Any, addresses: Any) -> Any:
        if isinstance(channels, list):
            len(set(channels))  # TypeError on an unhashable member: the old bug
        return original(self, recipient_id, channels, addresses)

    NotificationsCore.put_recipient = put_recipient  # type: ignore[method-assign]


def notifications_holds_urgent_a_round() -> None:
    """Every urgent notification waits one round (the backoff) before its first call, while reminders
    go at once: the urgent mean stays under 5 s at short rounds, and nothing queues for a backlog check
    to see; a reminder sent after an urgent one reaches the provider first."""
    from peakproof.targets.notifications.core import NotificationsCore

    original = NotificationsCore._enqueue

    def enqueue(self: NotificationsCore, n: Any, due: float) -> None:
        if n.priority == "urgent" and not n.attempts and due <= n.accepted_at:  # accepted just now: hold it
            due = n.accepted_at + self.backoff
        return original(self, n, due)

    NotificationsCore._enqueue = enqueue  # type: ignore[method-assign]


def feed_answers_with_the_previous_author() -> None:
    """Stores each post as asked, but answers a publish with the author and text of the post before it
    (a response object reused across requests): the client is told about somebody else's post."""
    from peakproof.targets.feed.app import FeedApp

    original = FeedApp._publish
    last: dict[str, Any] = {}

    async def publish(self: FeedApp, req: Any) -> Any:
        reply = await original(self, req)
        status, payload = reply[0], dict(reply[1])
        mine = {k: payload[k] for k in ("author_id", "text")}
        if last:
            payload.update(last)
        last.update(mine)
        return (status, payload, *reply[2:])

    FeedApp._publish = publish  # type: ignore[method-assign]


MUTANTS: dict[str, tuple[str, Callable[[], None]]] = {
    "feed-answers-with-the-previous-author": ("feed", feed_answers_with_the_previous_author),
    "notifications-holds-urgent-a-round": ("notifications", notifications_holds_urgent_a_round),
    "feed-405-without-allow": ("feed", feed_405_without_allow),
    "notifications-unhashable-channel-is-a-500": ("notifications", notifications_unhashable_channel_is_a_500),
    "tickets-sells-expired-holds": ("tickets", tickets_sells_expired_holds),
    "tickets-holds-never-lapse": ("tickets", tickets_holds_never_lapse),  # a design (peakproof.design), not a bug
    "tickets-500-on-every-reservation": ("tickets", tickets_500_on_every_reservation),
    "tickets-500-on-some-granted-holds": ("tickets", tickets_500_on_some_granted_holds),
    "tickets-accepts-nonpositive-quantity": ("tickets", tickets_accepts_nonpositive_quantity),
    "tickets-refuses-long-buyer-ids": ("tickets", tickets_refuses_long_buyer_ids),
    "tickets-keys-on-request-id-alone": ("tickets", tickets_keys_on_request_id_alone),
    "tickets-releases-holds-early": ("tickets", tickets_releases_holds_early),
    "tickets-unfenced-lease": ("tickets", tickets_unfenced_lease),
    "tickets-lock-without-lease": ("tickets", tickets_lock_without_lease),
    "feed-ignores-unfollows": ("feed", feed_ignores_unfollows),
    "feed-its-own-design": ("feed", feed_its_own_design),  # a design (peakproof.design), not a bug
    "feed-delete-lost-to-fanout": ("feed", feed_delete_lost_to_fanout),
    "feed-skips-a-post-at-each-page-boundary": ("feed", feed_skips_a_post_at_each_page_boundary),
    "feed-fanout-stalls": ("feed", feed_fanout_stalls),
    "notifications-new-key-per-call": ("notifications", notifications_new_key_per_call),
    "notifications-retries-a-dead-channel": ("notifications", notifications_retries_a_dead_channel),
    "notifications-budget-of-six": ("notifications", notifications_budget_of_six),
    "notifications-resends-replays": ("notifications", notifications_resends_replays),
    "notifications-ignores-preference": ("notifications", notifications_ignores_preference),
    "notifications-claims-delivered": ("notifications", notifications_claims_delivered),
    "notifications-breaker-counts-permanent": ("notifications", notifications_breaker_counts_permanent),
    "notifications-one-fifo": ("notifications", notifications_one_fifo),
    "notifications-dedups-on-event-alone": ("notifications", notifications_dedups_on_event_alone),
    # variants: every promise kept, answered as HTTP allows (the harness must PASS them)
    "tickets-http-semantics": ("tickets", http_semantics()),
    "tickets-checks-echo": ("tickets", tickets_checks_echo),
    # correct services on the standard library's http.server, answering as that stack does (stdlib_server.py)
    "tickets-on-stdlib": ("tickets", on_stdlib("tickets")),
    "feed-on-stdlib": ("feed", on_stdlib("feed")),
    "notifications-on-stdlib": ("notifications", on_stdlib("notifications")),
    # ... each accepting one request outside its contract (a contract note; --strict-contract fails it)
    "tickets-on-stdlib-lenient": ("tickets", on_stdlib("tickets", lenient=True)),
    "feed-on-stdlib-lenient": ("feed", on_stdlib("feed", lenient=True)),
    "notifications-on-stdlib-lenient": ("notifications", on_stdlib("notifications", lenient=True)),
    "tickets-expiry-job": ("tickets", tickets_expiry_job),
    "tickets-returns-lapsed-units-late": ("tickets", tickets_returns_lapsed_units_late),
    "notifications-breaker-never-opens": ("notifications", notifications_breaker_never_opens),
    "tickets-one-reservation-for-two-request-ids": ("tickets", tickets_one_reservation_for_two_request_ids),
    "feed-http-semantics": ("feed", http_semantics()),
    "feed-epoch-times": ("feed", http_semantics("epoch")),
    "notifications-http-semantics": ("notifications", http_semantics()),
}


def main(argv: list[str]) -> int:
    names = argv[0].split("+") if argv else []  # "a+b": both at once (a product with a design and a bug, say)
    if not names or any(n not in MUTANTS for n in names) or len({MUTANTS[n][0] for n in names}) != 1:
        sys.stderr.write(f"expected a mutant name (or several of one case joined by '+'), each one of "
                         f"{', '.join(MUTANTS)}; got {argv[:1]}\n")
        return 2
    for name in names:
        MUTANTS[name][1]()
    from peakproof.cli import main as peakproof

    return peakproof(argv[1:])


def served(mutant: str, **options: Any) -> Any:
    """A :class:`peakproof.launch.ServedTarget` that serves ``mutant`` instead of the reference."""
    from peakproof.cases import get_case
    from peakproof.launch import ServedTarget

    class MutantTarget(ServedTarget):
        def command(self) -> list[str]:
            cmd = super().command()  # [python, -m, peakproof, serve, case, ...]
            i = cmd.index("peakproof")
            return cmd[:i] + ["tests.support.mutants", mutant] + cmd[i + 1:]

    return MutantTarget(get_case(MUTANTS[mutant.split("+")[0]][0]), **options)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
