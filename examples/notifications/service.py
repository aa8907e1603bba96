"""An example staging notification service whose HTTP API differs from peakproof's contract.

It keeps the promises of peakproof's notifications case (Case N), but its API is shaped like a
real company's (paths, field names, states, +03:00 times), not like targets/notifications/
openapi.json: the driver example shows how a peakproof user adapts such a service.

    POST /v1/users/{id}/contact  {"prefs": ["push", "sms", "email"], "push_token", "phone", "email"}
    POST /v1/messages            {"dedupe_key", "to", "urgency": "high"|"low", "subject", "text"}
    GET  /v1/messages/{id}       {"message": {"id", "state", "via", "created", "sent", "tries", ...}}

Delivery is the reference design's: one provider call per round, at most 3 rounds 30 s apart;
the preferred channel, then the next in the user's order, never again one that answered
"permanent"; a breaker per channel counting only transient failures; an unknown outcome
(timeout, lost answer) retried on the same channel with the same idempotency key (event,
recipient), so the provider delivers once. Urgent ("high") goes before reminders ("low").
``--broken`` retries an unknown outcome with a NEW key instead: duplicate deliveries.
Standard library only, state in memory, 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import heapq
import html
import http.client
import itertools
import json
import signal
import threading
import time
import unicodedata
import uuid
from collections import deque
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

CHANNELS = ("push", "sms", "email")
ADDRESS = {"push": "push_token", "sms": "phone", "email": "email"}
BUDGET, BACKOFF, CALL_TIMEOUT = 3, 30.0, 2.0  # calls per message, s between rounds, s to wait for an answer
IST = timezone(timedelta(hours=3))  # the company's clock: every time on the wire is +03:00


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, IST).isoformat(timespec="milliseconds")


class Refusal(Exception):
    """An answer other than success: Refusal(status, detail)."""


# -- per-channel formatting: what the providers accept (SMS segments, push and e-mail sizes) ---
GSM7 = set("@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
           "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà")
GSM7_EXT = set("^{}\\[~]|€\f")  # two septets each


def _one_line(text: str) -> str:
    return " ".join("".join(" " if unicodedata.category(c)[0] == "C" else c for c in text).split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:max(0, limit - 1)] + "…"


def _sms_units(text: str) -> tuple[str, int]:
    if all(c in GSM7 or c in GSM7_EXT for c in text):
        return "GSM-7", sum(2 if c in GSM7_EXT else 1 for c in text)
    return "UCS-2", len(text.encode("utf-16-le")) // 2  # Turkish ı ş ğ İ are not GSM-7


def format_message(channel: str, subject: str, text: str) -> dict:
    if channel == "sms":  # at most 3 segments of 153 GSM-7 septets or 67 UCS-2 units
        body = _one_line(f"{subject}: {text}" if subject else text)
        enc, units = _sms_units(body)
        if units > 3 * (153 if enc == "GSM-7" else 67):
            body = body[:201]  # "…" is not GSM-7, so a cut text is UCS-2: 201 units at most
            while body and _sms_units(body + "…")[1] > 201:
                body = body[:-1]  # whole characters, never half a surrogate pair
            body += "…"
            enc, units = _sms_units(body)
        single, multi = (160, 153) if enc == "GSM-7" else (70, 67)
        return {"text": body, "encoding": enc, "segments": 1 if units <= single else -(-units // multi)}
    if channel == "push":  # title <= 100 characters, whole JSON payload <= 4,096 bytes
        payload = {"title": _clip(_one_line(subject), 100), "body": text}
        while (size := len(json.dumps(payload, ensure_ascii=False).encode())) > 4096:
            payload["body"] = _clip(payload["body"], max(0, len(payload["body"]) - max(1, (size - 4096) // 4) - 1))
        return payload
    # e-mail: a one-line subject (no header injection), an escaped body
    return {"subject": _clip(_one_line(subject), 78), "html": "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"}


# -- the per-channel breaker -------------------------------------------------------------------
class Breaker:
    """Opens at 24 transient failures among a channel's last 200 calls; a probe after 10 s.
    Permanent failures are about an address, not the channel: they are not counted."""

    def __init__(self, window: int = 200, failures: int = 24, cool_down: float = 10.0) -> None:
        self.failures, self.cool_down = failures, cool_down
        self.recent: deque[bool] = deque(maxlen=window)  # True: a transient failure (or no answer)
        self.state, self.open_until, self.probe_out = "closed", 0.0, False

    def allows(self, now: float) -> bool:
        if self.state == "open" and now >= self.open_until:
            self.state, self.probe_out = "half-open", False
        return self.state == "closed" or (self.state == "half-open" and not self.probe_out)

    def admit(self) -> None:
        if self.state == "half-open":
            self.probe_out = True  # this call is the one probe

    def record(self, outcome: str, now: float) -> None:
        if outcome == "permanent" and self.state != "half-open":
            return
        failed = outcome in ("transient", "unknown")
        if self.state == "half-open":
            self.probe_out = False
            self.state, self.open_until = ("open" if failed else "closed"), now + self.cool_down
            self.recent.clear()
            return
        self.recent.append(failed)
        if sum(self.recent) >= self.failures:
            self.state, self.open_until = "open", now + self.cool_down
            self.recent.clear()


# -- the service -------------------------------------------------------------------------------
class Message:
    __slots__ = ("id", "dedupe_key", "to", "urgency", "subject", "text", "state", "via", "created", "sent", "tries")

    def __init__(self, dedupe_key: str, to: str, urgency: str, subject: str, text: str) -> None:
        self.id, self.dedupe_key, self.to, self.urgency = uuid.uuid4().hex, dedupe_key, to, urgency
        self.subject, self.text = subject, text
        self.state, self.via, self.created, self.sent = "PENDING", None, time.time(), None
        self.tries: list[tuple[str, str, float]] = []  # (channel, ok|transient|permanent|unknown, time)

    def to_json(self) -> dict:
        return {"id": self.id, "dedupe_key": self.dedupe_key, "to": self.to, "urgency": self.urgency,
                "state": self.state, "via": self.via, "created": iso(self.created), "sent": iso(self.sent),
                "tries": [{"via": c, "result": o if o in ("ok", "unknown") else "error", "time": iso(t)}
                          for c, o, t in self.tries]}


class Notifier:
    def __init__(self, providers_url: str, *, broken: bool = False, backoff: float = BACKOFF,
                 call_timeout: float = CALL_TIMEOUT, workers: int = 16, urgent_only: int = 4) -> None:
        parts = urlsplit(providers_url.rstrip("/"))
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"--providers must be http://host:port; got {providers_url!r}")
        self.host, self.port, self.base = parts.hostname, parts.port or 80, parts.path
        self.broken, self.backoff, self.call_timeout = broken, backoff, call_timeout
        self.lock = threading.Lock()  # guards everything below
        self.users: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.messages: dict[str, Message] = {}
        self.by_key: dict[tuple[str, str], Message] = {}
        self.queues: dict[str, list] = {"high": [], "low": []}  # heaps of (due, seq, message id)
        self.wake = {"high": threading.Condition(self.lock), "low": threading.Condition(self.lock)}
        self.breakers = {c: Breaker() for c in CHANNELS}
        self.seq, self.stopped, self.local = itertools.count(), False, threading.local()
        # a few workers take only urgent messages, so reminders can never occupy every worker
        self.workers = [threading.Thread(target=self._work, args=(("high",) if i < urgent_only else ("high", "low"),),
                                         name=f"notify-{i}", daemon=True) for i in range(workers)]
        for t in self.workers:
            t.start()

    def set_contact(self, user: str, doc: dict) -> dict:
        prefs = doc.get("prefs")
        if not isinstance(prefs, list) or not prefs or len(set(map(str, prefs))) != len(prefs) or any(
                p not in CHANNELS for p in prefs):
            raise Refusal(422, "prefs must be a non-empty list of distinct channels from push, sms, email")
        addresses = {}
        for c in prefs:
            a = doc.get(ADDRESS[c])
            if not isinstance(a, str) or not 0 < len(a) <= 320:
                raise Refusal(422, f"prefs has {c}: {ADDRESS[c]} must be a string of 1 to 320 characters")
            addresses[c] = a
        with self.lock:
            self.users[user] = (list(prefs), addresses)
        return {"user": user, "prefs": prefs}

    def accept(self, doc: dict) -> tuple[dict, bool]:
        for name in ("dedupe_key", "to"):
            if type(doc.get(name)) is not str or not 0 < len(doc[name]) <= 200:
                raise Refusal(422, f"{name} must be a string of 1 to 200 characters")
        if doc.get("urgency") not in ("high", "low"):
            raise Refusal(422, "urgency must be 'high' or 'low'")
        for name, limit in (("subject", 1_000), ("text", 20_000)):
            if not isinstance(doc.get(name, ""), str) or len(doc.get(name, "")) > limit:
                raise Refusal(422, f"{name} must be a string of at most {limit} characters")
        with self.lock:
            if doc["to"] not in self.users:
                raise Refusal(404, "unknown user")
            m = self.by_key.get((doc["dedupe_key"], doc["to"]))
            if m is not None:  # a replay: the first message, nothing sent again
                return m.to_json(), False
            m = Message(doc["dedupe_key"], doc["to"], doc["urgency"], doc.get("subject", ""), doc.get("text", ""))
            self.messages[m.id] = self.by_key[(m.dedupe_key, m.to)] = m
            self._enqueue(m, m.created)
            return m.to_json(), True

    def get(self, message_id: str) -> dict | None:
        with self.lock:
            m = self.messages.get(message_id)
            return None if m is None else m.to_json()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            for cond in self.wake.values():
                cond.notify_all()
        for t in self.workers:
            t.join(self.call_timeout + 1)

    # -- delivery (every method below runs with self.lock held, except the provider call) ---

    def _enqueue(self, m: Message, due: float) -> None:
        lane = m.urgency
        heapq.heappush(self.queues[lane], (due, next(self.seq), m.id))
        self.wake[lane].notify()
        if lane == "high":
            self.wake["low"].notify()  # the mixed workers take urgent ones too

    def _work(self, lanes: tuple[str, ...]) -> None:
        while True:
            with self.lock:
                job = self._take(lanes)
            if job is None:
                return
            m, channel, key = job
            outcome = self._post(m, channel, key)
            with self.lock:
                self._complete(m, channel, outcome)

    def _take(self, lanes: tuple[str, ...]):
        """The next due call, urgent first; None once stopped."""
        while not self.stopped:
            now = time.time()
            for lane in lanes:
                queue = self.queues[lane]
                while queue and queue[0][0] <= now:
                    m = self.messages[heapq.heappop(queue)[2]]
                    channel = self._plan(m, now)
                    if channel is not None:
                        m.state = "IN_FLIGHT"
                        base = f"{m.dedupe_key}/{m.to}"  # (event, recipient): the channel is not in the key
                        if self.broken and m.tries and m.tries[-1][1] == "unknown":
                            base += f"/retry-{len(m.tries)}"  # BROKEN: a new key, so the provider cannot dedupe
                        return m, channel, base
            due = [self.queues[lane][0][0] for lane in lanes if self.queues[lane]]
            self.wake[lanes[-1]].wait(min(due) - now if due else 5.0)
        return None

    def _plan(self, m: Message, now: float) -> str | None:
        """This round's channel, or None when the message is finished (budget spent, no channel left)."""
        prefs, addresses = self.users[m.to]
        if len(m.tries) >= BUDGET:
            return self._finish(m)
        if m.tries and m.tries[-1][1] == "unknown":
            return m.tries[-1][0]  # maybe delivered: same channel, same key, the provider dedupes
        order = [c for c in prefs if c in addresses]
        dead = {c for c, o, _ in m.tries if o == "permanent"}
        start = order.index(m.tries[-1][0]) + 1 if m.tries and m.tries[-1][0] in order else 0
        candidates = [c for c in order[start:] + order[:start] if c not in dead]
        if not candidates:
            return self._finish(m)
        channel = next((c for c in candidates if self.breakers[c].allows(now)), candidates[0])
        self.breakers[channel].admit()
        return channel

    def _finish(self, m: Message) -> None:
        # if the last answer never came the message may well have arrived: not GAVE_UP, that could be a lie
        m.state = "IN_FLIGHT" if m.tries and m.tries[-1][1] == "unknown" else "GAVE_UP"

    def _complete(self, m: Message, channel: str, outcome: str) -> None:
        now = time.time()
        self.breakers[channel].record(outcome, now)
        m.tries.append((channel, outcome, now))
        if outcome == "ok":
            m.state, m.via, m.sent = "SENT", channel, now
        elif len(m.tries) >= BUDGET:
            self._finish(m)
        else:
            self._enqueue(m, now + self.backoff)  # stays IN_FLIGHT between rounds: states only move forward

    def _post(self, m: Message, channel: str, key: str) -> str:
        """One provider call: ok, transient (certainly not delivered), permanent or unknown (maybe delivered)."""
        prefs, addresses = self.users[m.to]  # a user's entry is replaced whole, never changed: safe unlocked
        body = json.dumps({"to": addresses.get(channel, ""), "idempotency_key": key, "event_id": m.dedupe_key,
                           "recipient_id": m.to, "message": format_message(channel, m.subject, m.text)}).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        for attempt in (1, 2):
            conn = getattr(self.local, "conn", None)
            if conn is None:  # one kept-alive connection per worker
                conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.call_timeout)
            reused = conn.sock is not None
            try:
                if not reused:
                    conn.connect()
            except OSError:
                conn.close()
                return "transient"  # never reached the provider
            try:
                conn.request("POST", f"{self.base}/{channel}", body, headers)
                resp = conn.getresponse()
                resp.read()
                code = resp.status
                return "ok" if 200 <= code < 300 else "transient" if code == 429 or code >= 500 else "permanent"
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not (reused and attempt == 1):
                    return "unknown"
                # a kept-alive connection the provider had closed: once more on a new one, same key
            except (OSError, http.client.HTTPException):  # a timeout among them: sent, never answered
                conn.close()
                return "unknown"
        return "unknown"


# -- HTTP --------------------------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every answer has a Content-Length
    disable_nagle_algorithm = True  # headers and body go out in two writes
    server: "Server"

    def log_message(self, format: str, *args: object) -> None:
        pass  # no per-request logging

    def handle_one(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= 1_000_000 or "Transfer-Encoding" in self.headers:
                raise ValueError
        except ValueError:
            self.close_connection = True  # the body cannot be skipped: the connection ends here
            return self._reply(413, {"detail": "send a body of at most 1 MB, with a Content-Length"})
        raw = self.rfile.read(length)
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/")[1:]]
        try:
            status, doc = self.route(self.command, parts, raw)
        except Refusal as e:
            status, doc = e.args[0], {"detail": e.args[1]}
        except Exception as e:  # noqa: BLE001 - a bug answers 500, never a dropped connection
            status, doc = 500, {"detail": f"internal error: {type(e).__name__}"}
        self._reply(status, doc)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_one

    def route(self, method: str, parts: list[str], raw: bytes) -> tuple[int, dict]:
        svc = self.server.notifier
        if method == "POST" and len(parts) == 4 and parts[:2] == ["v1", "users"] and parts[3] == "contact":
            if not 0 < len(parts[2]) <= 200:
                raise Refusal(422, "a user id is 1 to 200 characters")
            return 200, svc.set_contact(parts[2], _json(raw))
        if method == "POST" and parts == ["v1", "messages"]:
            msg, created = svc.accept(_json(raw))
            return (202 if created else 200), {"message": msg}
        if method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "messages"]:
            msg = svc.get(parts[2])
            if msg is None:
                raise Refusal(404, "unknown message")
            return 200, {"message": msg}
        raise Refusal(404, "no such route")

    def _reply(self, status: int, doc: dict) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _json(raw: bytes) -> dict:
    try:
        doc = json.loads(raw or b"null")
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise Refusal(422, "the body must be a JSON object")
    return doc


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # socketserver's default backlog of 5 resets connections when many open at once

    def shutdown(self) -> None:
        """Stop serving, then the delivery workers."""
        super().shutdown()
        self.server_close()
        self.notifier.stop()


def serve(providers_url: str, port: int = 0, broken: bool = False, **options: float) -> tuple[Server, str]:
    """Start the service in daemon threads; ``server.shutdown()`` stops it. ``options``: backoff, call_timeout."""
    notifier = Notifier(providers_url, broken=broken, **options)
    server = Server(("127.0.0.1", port), Handler)
    server.notifier = notifier
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--providers", required=True, help="the provider simulator, http://127.0.0.1:PORT")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--broken", action="store_true", help="retry unknown outcomes with a new key (duplicates)")
    p.add_argument("--backoff", type=float, default=BACKOFF, help="s between rounds (30)")
    args = p.parse_args()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    server, url = serve(args.providers, args.port, args.broken, backoff=args.backoff)
    print(f"listening on {url}", flush=True)
    while not done.wait(1.0):  # a signal handler only runs between the main thread's waits
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
