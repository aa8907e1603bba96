"""Delivery: Celery 5 on Redis. One task per notification round, ``deliver(notification_id)``.

Urgent notifications go to the ``urgent`` queue, which a worker pool of its own consumes; reminders
to ``default``. A round (one provider call) happens in three steps:

1. claim it in PostgreSQL (the notification's row locked ``FOR UPDATE``): the budget (3 calls), the
   channel (the recipient's preferences, then any other channel they have an address for; never a
   channel whose address is on the suppression list or answered 422; the same channel again after an
   answer that never came; a channel whose breaker is open is skipped), an ``attempts`` row;
2. call the provider (``providers.send``: an answer timeout, an idempotency key made of (event, recipient));
3. record the outcome; if not delivered and budget is left, ``self.retry(countdown=...)``: Celery's
   own retry machinery, ``backoff`` s after a transient failure or no answer, ``backoff_after_permanent``
   after a 422 (the next channel need not wait).

Tasks are acknowledged late (``acks_late``: a worker that dies mid-call leaves its task to another).
The broker's ``visibility_timeout`` is an hour, longer than any countdown, as Celery's documentation
asks for ETA tasks on Redis. ``--defect visibility-timeout`` sets it to a quarter of the backoff:
a retry waiting for its countdown in one worker is then handed to another as if lost, both copies
run the round at its ETA, and the second claims the next channel while the first is calling.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from celery import Celery
from kombu import Queue

from . import db, providers
from .breaker import Breakers
from .settings import CHANNELS, load

S = load()
log = logging.getLogger("beacon.deliver")

app = Celery("beacon", broker=S.redis_url)
app.conf.update(
    task_queues=(Queue("default"), Queue("urgent")),
    task_default_queue="default",
    task_ignore_result=True,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        "visibility_timeout": S.visibility_timeout,
        # sweep for messages unacknowledged beyond the visibility timeout 4 times a second (kombu's
        # default: every 100 s): a task a dead worker held goes back to the queue at once
        "unacked_restore_interval": 0.25, "unacked_restore_throttle": 1,
    },
    worker_hijack_root_logger=False,
)

_breakers: Breakers | None = None


def breakers() -> Breakers:
    global _breakers
    if _breakers is None:
        _breakers = Breakers(redis.Redis.from_url(S.redis_url), S.breaker_window, S.breaker_failures,
                             S.breaker_cool_down, probe_hold=S.answer_timeout + 1.0)
    return _breakers


def queue_for(priority: str) -> str:
    return "urgent" if priority == "high" else "default"


# attempts.result <- the call's outcome
RESULT = {"ok": "delivered", "transient": "retryable", "permanent": "rejected", "unknown": "no_answer"}


@dataclass
class Round:
    notification_id: int
    attempt_id: int
    seq: int
    channel: str
    key: str  # the provider's Idempotency-Key for this call
    address: str
    event_id: str
    recipient_id: str
    priority: str
    title: str
    body: str
    probe: bool = False  # the call is its channel's half-open breaker's probe


def cascade(recipient: dict) -> list[str]:
    """The recipient's channels in order: their preferences, then any other channel they have an address for
    (of the channels this deployment has: ``--channels``)."""
    has = [c for c in CHANNELS if c in S.channels and recipient[providers.ADDRESS[c]]]
    return [c for c in recipient["preferences"] if c in has] + [c for c in has if c not in recipient["preferences"]]


def claim(notification_id: int) -> Round | None:
    """This round's call, claimed in the database; None when the notification is finished."""
    conn = db.connect(S.database_url)
    with conn.transaction():
        n = conn.execute("SELECT * FROM notifications WHERE id = %s FOR UPDATE", (notification_id,)).fetchone()
        if n is None or n["state"] in ("DELIVERED", "FAILED"):
            return None
        r = conn.execute("SELECT * FROM recipients WHERE id = %s", (n["recipient_id"],)).fetchone()
        attempts = conn.execute("SELECT seq, channel, result FROM attempts WHERE notification_id = %s ORDER BY seq",
                                (notification_id,)).fetchall()
        last = attempts[-1] if attempts else None
        if len(attempts) >= S.budget:
            _finish(conn, notification_id, last)
            return None
        probe = False
        if last is not None and last["result"] == "no_answer":
            channel = last["channel"]  # maybe delivered: the same channel, the same key
        elif S.one_channel:  # the variant of its own design: one channel per notification, no cascade
            order = cascade(r)
            channel = attempts[0]["channel"] if attempts else (order[0] if order else None)
            dead = channel is None or any(a["result"] == "rejected" for a in attempts) or conn.execute(
                "SELECT 1 FROM suppressions WHERE channel = %s AND address = %s",
                (channel, r[providers.ADDRESS[channel]])).fetchone() is not None
            if dead:  # a dead address on its one channel: nowhere else to go
                _finish(conn, notification_id, last)
                return None
        else:
            order = cascade(r)
            addresses = [(c, r[providers.ADDRESS[c]]) for c in order]
            suppressed = {row["channel"] for row in conn.execute(
                "SELECT channel FROM suppressions WHERE (channel, address) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
                ([c for c, _ in addresses], [a for _, a in addresses])).fetchall()} if addresses else set()
            rejected = {a["channel"] for a in attempts if a["result"] == "rejected"}
            start = order.index(last["channel"]) + 1 if last is not None and last["channel"] in order else 0
            candidates = [c for c in order[start:] + order[:start] if c not in suppressed | rejected]
            if not candidates:
                _finish(conn, notification_id, last)
                return None
            channel = candidates[0]  # every breaker open: the round goes to the first all the same
            for c in candidates if S.breaker else candidates[:1]:  # no breaker (--no-breaker): the first, always
                allowed = breakers().allows(c) if S.breaker else 1
                if allowed:
                    channel, probe = c, allowed == 2
                    break
        # The key names one send the provider may have taken: the same after an answer that never came (it
        # may have delivered: the provider deduplicates), a new one after a 503 on that channel (it took nothing),
        # so a cascade that comes back to a channel in its last round sends afresh.
        refused = sum(1 for a in attempts if a["channel"] == channel and a["result"] == "retryable")
        key = f"{n['event_id']}/{n['recipient_id']}" + (f"/{refused}" if refused else "")
        if S.defect == "replay-sends-twice" and any(a["result"] == "delivered" for a in attempts):
            key += f"/resend-{len(attempts) + 1}"  # THE DEFECT's second half: a resend is a send of its own
        seq = len(attempts) + 1
        attempt_id = conn.execute("INSERT INTO attempts (notification_id, seq, channel, idempotency_key) "
                                  "VALUES (%s, %s, %s, %s) RETURNING id", (notification_id, seq, channel, key)).fetchone()["id"]
        conn.execute("UPDATE notifications SET state = 'SENDING' WHERE id = %s AND state = 'QUEUED'", (notification_id,))
    return Round(notification_id, attempt_id, seq, channel, key, r[providers.ADDRESS[channel]], n["event_id"],
                 n["recipient_id"], n["priority"], n["title"], n["body"], probe)


def _finish(conn, notification_id: int, last: dict | None) -> None:
    """No round left: FAILED, unless the last call went unanswered (it may have delivered: SENDING stays)."""
    if last is None or last["result"] != "no_answer":
        conn.execute("UPDATE notifications SET state = 'FAILED' WHERE id = %s AND state IN ('QUEUED', 'SENDING')",
                     (notification_id,))


def record(rnd: Round, outcome: str) -> None:
    conn = db.connect(S.database_url)
    with conn.transaction():
        conn.execute("UPDATE attempts SET result = %s, finished_at = clock_timestamp() WHERE id = %s",
                     (RESULT[outcome], rnd.attempt_id))
        if outcome == "ok":
            conn.execute("UPDATE notifications SET state = 'DELIVERED', channel = %s, delivered_at = clock_timestamp() "
                         "WHERE id = %s AND state <> 'DELIVERED'", (rnd.channel, rnd.notification_id))
        elif outcome == "permanent":
            conn.execute("INSERT INTO suppressions (channel, address, reason) VALUES (%s, %s, %s) "
                         "ON CONFLICT DO NOTHING", (rnd.channel, rnd.address, f"422 for notification {rnd.notification_id}"))
        if outcome != "ok" and rnd.seq >= S.budget and outcome != "unknown":
            conn.execute("UPDATE notifications SET state = 'FAILED' WHERE id = %s AND state = 'SENDING'",
                         (rnd.notification_id,))


@app.task(bind=True, name="beacon.deliver", acks_late=True, max_retries=S.budget)
def deliver(self, notification_id: int) -> str:
    rnd = claim(notification_id)
    if rnd is None:
        log.info("notification %s: finished (task %s try %s)", notification_id, self.request.id,
                 self.request.retries)  # a second copy of a round comes here: the logs show which ran twice
        return "finished"
    outcome = providers.send(S.provider_url, rnd.channel, rnd.key, rnd.address, rnd.event_id, rnd.recipient_id,
                             rnd.title, rnd.body, S.answer_timeout)
    if S.breaker:
        breakers().record(rnd.channel, outcome, rnd.probe)
    record(rnd, outcome)
    log.info("notification %s round %s via %s: %s (task %s try %s)", notification_id, rnd.seq, rnd.channel, outcome,
             self.request.id, self.request.retries)
    if outcome == "ok" or rnd.seq >= S.budget:
        return outcome
    countdown = S.backoff_after_permanent if outcome == "permanent" else S.backoff
    raise self.retry(countdown=countdown, queue=queue_for(rnd.priority))
