"""Chirp: an example staging news-feed service whose HTTP API is NOT peakproof's feed contract.

It exists for the driver example: a peakproof user adapts an API shaped like a real
company's (``/graph``, ``/chirps``, ``/timeline``; ``by``/``body``/``ts``; ``count``/``before``/
``more``) to the harness with a driver, instead of reshaping the service.

Design: merge on read (pull). There are no inboxes: each author keeps a list of its own
post keys, sorted because times only increase, and a timeline read merges the newest
``count`` keys of every followee with heapq. The semantics follow the reference target
(``targets/feed/core.py``, policy "pull"):

* order: newest first by the key (microseconds, id), ties by id, descending;
* a user's own chirps are not in their timeline (only followees' are), a deleted chirp
  never shows, an unfollowed author stops showing once the unfollow has returned;
* ``before`` is the key of the last chirp of the previous page and a page holds only keys
  strictly below it, so new chirps between pages neither shift nor repeat anything;
  ``more`` is given exactly when the page is full (the next page may be empty);
* ``count`` is 1..100 (default 20), ids are strings of 1..200 characters, a body at most
  5,000 characters; following yourself is refused; follow, unfollow and delete are idempotent.

``--broken``: a delete marks the chirp deleted, but timelines read a per-author cache that
is refreshed only when that author posts again, so a deleted chirp stays visible until then.

    python examples/feed/service.py [--port 0] [--broken]

Standard library only; binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import gc
import heapq
import itertools
import json
import signal
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

PAGE, MAX_PAGE, MAX_ID, MAX_BODY_CHARS = 20, 100, 200, 5_000
MAX_REQUEST = 64 * 1024 * 1024  # a bulk-follows body: a couple of million edges
ZONE = timezone(timedelta(hours=3))  # the company's servers report local time (+03:00)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def require_id(name: str, value: object) -> str:
    if type(value) is not str or not 0 < len(value) <= MAX_ID:
        raise bad(f"{name} must be a string of 1 to {MAX_ID} characters; got {value!r:.60}")
    return value


class Chirps:
    """All state, behind one lock. A key is (microseconds since the epoch, id)."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.lock = threading.Lock()
        self.chirps: dict[str, dict] = {}           # id -> the CHIRP document
        self.keys: dict[str, tuple[int, str]] = {}  # id -> its key
        self.deleted: set[str] = set()
        # Each author's visible keys, ascending. Correct: a delete removes the key at once.
        # Broken: the delete is only applied when the author next posts (the stale cache).
        self.by_author: dict[str, list[tuple[int, str]]] = {}
        self.stale: dict[str, set[tuple[int, str]]] = {}  # broken only: deletes not yet applied
        self.following: dict[str, set[str]] = {}
        self._ids = itertools.count(1)
        self._last_us = 0

    def follow_many(self, edges: list[tuple[str, str]]) -> int:
        for user, target in edges:  # all refused or none applied, like the reference
            require_id("user", user)
            require_id("target", target)
            if user == target:
                raise bad(f"a user cannot follow themselves ({user!r})")
        with self.lock:
            added = 0
            for user, target in edges:
                mine = self.following.setdefault(user, set())
                if target not in mine:
                    mine.add(target)
                    added += 1
            return added

    def unfollow(self, user: str, target: str) -> None:
        with self.lock:
            self.following.get(user, set()).discard(target)

    def post(self, by: object, body: object) -> dict:
        require_id("by", by)
        if type(body) is not str or len(body) > MAX_BODY_CHARS:
            raise bad(f"body must be a string of at most {MAX_BODY_CHARS:,} characters")
        with self.lock:
            # strictly increasing times (even if the wall clock steps back): appends keep lists sorted
            us = self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
            cid = f"ch{next(self._ids):010d}"  # zero-padded: id order is creation order
            ts = (EPOCH + timedelta(microseconds=us)).astimezone(ZONE).isoformat(timespec="microseconds")
            chirp = {"id": cid, "by": by, "body": body, "ts": ts}
            self.chirps[cid], self.keys[cid] = chirp, (us, cid)
            keys = self.by_author.setdefault(by, [])
            if self.broken and by in self.stale:  # the cache is refreshed only now
                gone = self.stale.pop(by)
                keys[:] = [k for k in keys if k not in gone]
            keys.append((us, cid))
            return chirp

    def delete(self, cid: str) -> dict:
        with self.lock:
            chirp = self.chirps.get(cid)
            if chirp is None:
                raise ApiError(404, "not_found", f"no chirp {cid!r}")
            if cid not in self.deleted:
                self.deleted.add(cid)
                key = self.keys[cid]
                if self.broken:
                    self.stale.setdefault(chirp["by"], set()).add(key)  # BUG (deliberate): not applied yet
                else:
                    keys = self.by_author[chirp["by"]]
                    del keys[bisect.bisect_left(keys, key)]
            return chirp

    def timeline(self, user: str, count: int, before: tuple[int, str] | None) -> tuple[list[dict], tuple | None]:
        require_id("user", user)
        bound = before if before is not None else (1 << 62, "")
        with self.lock:
            streams = []
            for author in self.following.get(user, ()):
                keys = self.by_author.get(author)
                if keys:
                    end = bisect.bisect_left(keys, bound)  # keys strictly older than the cursor
                    streams.append(reversed(keys[max(0, end - count):end]))  # at most count each
            page = [self.chirps[k[1]] for k in itertools.islice(heapq.merge(*streams, reverse=True), count)]
            more = self.keys[page[-1]["id"]] if len(page) == count else None
            return page, more


def encode_token(key: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, str]:
    try:
        us, cid = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if type(us) is int and type(cid) is str:
            return us, cid
    except (ValueError, TypeError):
        pass
    raise bad(f"before must be a 'more' token this service returned; got {token[:80]!r}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length
    server_version, sys_version = "chirp/1.0", ""
    wbufsize = 1 << 16  # headers and body leave in one write (flushed after each request)
    timeout = 30        # an idle keep-alive connection frees its thread
    store: Chirps       # set on the per-server subclass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass  # no per-request logging: it would cost more than the work at peak load

    def do_GET(self) -> None: self.dispatch()
    def do_POST(self) -> None: self.dispatch()
    def do_DELETE(self) -> None: self.dispatch()
    def do_PUT(self) -> None: self.dispatch()
    def do_PATCH(self) -> None: self.dispatch()

    def dispatch(self) -> None:
        try:
            body = self.rfile.read(self.body_length())  # read it all, even for a 404, to keep the connection
            status, doc = self.route(body)
        except ApiError as e:
            status, doc = e.status, {"message": e.message, "kind": e.kind}
        except Exception as e:  # a bug: answer it, never drop the connection
            status, doc = 500, {"message": f"{type(e).__name__}: {e}", "kind": "internal"}
        out = json.dumps(doc, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def body_length(self) -> int:
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if not 0 <= n <= MAX_REQUEST:
            self.close_connection = True  # the body cannot be skipped safely
            raise bad(f"Content-Length must be 0 to {MAX_REQUEST} bytes")
        return n

    def route(self, body: bytes) -> tuple[int, dict]:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        m, s, n = self.command, self.store, len(parts)
        if m == "POST" and n == 3 and parts[0] == "graph" and parts[1] and parts[2] == "follows":
            target = json_body(body, "target")["target"]
            s.follow_many([(require_id("user", parts[1]), require_id("target", target))])
            return 200, {"user": parts[1], "follows": target}
        if m == "DELETE" and n == 4 and parts[0] == "graph" and parts[2] == "follows" and parts[1] and parts[3]:
            s.unfollow(parts[1], parts[3])
            return 200, {"user": parts[1], "unfollowed": parts[3]}
        if m == "POST" and parts == ["chirps"]:
            doc = json_body(body, "by", "body")
            return 201, {"chirp": s.post(doc["by"], doc["body"])}
        if m == "DELETE" and n == 2 and parts[0] == "chirps" and parts[1]:
            return 200, {"chirp": s.delete(parts[1]), "deleted": True}
        if m == "GET" and n == 2 and parts[0] == "timeline" and parts[1]:
            q = parse_qs(url.query)
            raw = q.get("count", [str(PAGE)])[-1]
            try:
                count = int(raw)
            except ValueError:
                count = 0
            if not 1 <= count <= MAX_PAGE:
                raise bad(f"count must be an integer from 1 to {MAX_PAGE}; got {raw[:20]!r}")
            token = q.get("before", [""])[-1]
            page, more = s.timeline(parts[1], count, decode_token(token) if token else None)
            return 200, {"chirps": page, "more": encode_token(more) if more else None}
        if m == "POST" and parts == ["admin", "bulk-follows"]:
            edges = json_body(body, "edges")["edges"]
            if not isinstance(edges, list) or not all(isinstance(e, list) and len(e) == 2 for e in edges):
                raise bad("edges must be a list of [user, followee] pairs")
            added = s.follow_many([(u, f) for u, f in edges])
            gc.freeze()  # a big graph lives as long as the process: keep it out of every collection
            return 200, {"count": added}
        raise ApiError(404, "not_found", f"no route {m} {url.path}")


def json_body(body: bytes, *required: str) -> dict:
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise bad(f"the body must be a JSON object: {e}") from None
    if not isinstance(doc, dict):
        raise bad("the body must be a JSON object")
    missing = [k for k in required if k not in doc]
    if missing:
        raise bad(f"missing field(s): {', '.join(missing)}")
    return doc


class Server(ThreadingHTTPServer):
    daemon_threads = True      # a connection's thread never holds up the exit
    request_queue_size = 1024  # a peak opens many connections at once (the default 5 resets them)


def serve(port: int = 0, broken: bool = False) -> tuple[ThreadingHTTPServer, str]:
    """Start the service on 127.0.0.1 in a daemon thread; ``server.shutdown()`` stops it."""
    handler = type("ChirpHandler", (Handler,), {"store": Chirps(broken)})
    server = Server(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, name="chirp-http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--broken", action="store_true", help="deleted chirps stay visible until the author posts")
    args = parser.parse_args()
    server, url = serve(args.port, args.broken)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"listening on {url}", flush=True)
    while not stop.wait(1.0):
        pass
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
