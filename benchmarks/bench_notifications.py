"""Benchmark: accepted notifications per second per core of the reference target (issue 12).

The target is served pinned to one core (``taskset``) with its dispatcher off (the accept
path alone: parse, validate, dedupe on (event, recipient), persist, answer once durable);
the load comes from the other core: one process of pipelined HTTP/1.1 over raw sockets
(``--connections`` x ``--depth`` requests in flight, every one a fresh event), so the
client costs little next to the target. It prints 202s per second for each store:

* ``each``: one SQLite transaction per accepted notification, reads from SQLite (the path
  before group commits);
* ``group``: writes journaled and committed in batches, one transaction per batch, each
  client answered once its batch is durable; reads from memory.

Goal: >= 5,000 accepts/s on one core. With ``--deliver`` the dispatcher runs too (providers
simulator on the client's core), so the figure includes delivering what is accepted.

    python benchmarks/bench_notifications.py [--seconds 5] [--connections 16] [--depth 16]
"""

from __future__ import annotations

import argparse
import json
import selectors
import shutil
import socket
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import requests

from peakproof.launch import ServedTarget


class Pinned(ServedTarget):
    """A served target on one core (``taskset -c``), when taskset exists."""

    def __init__(self, case: str, core: int, **options: Any) -> None:
        super().__init__(case, **options)
        self.core = core

    def command(self) -> list[str]:
        cmd = super().command()
        return (["taskset", "-c", str(self.core)] + cmd) if shutil.which("taskset") else cmd


def pipelined_load(url: str, recipients: list[str], seconds: float, connections: int, depth: int) -> dict[str, Any]:
    """Keep ``depth`` POSTs in flight on each of ``connections`` sockets for ``seconds``; count answers."""
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path + "/notifications"
    run = uuid.uuid4().hex[:6]
    counter = iter(range(10**9))

    def request() -> bytes:
        i = next(counter)
        body = json.dumps({"event_id": f"b{run}-{i}", "recipient_id": recipients[i % len(recipients)],
                           "priority": "reminder" if i % 10 else "urgent", "title": "Kargonuz yolda",
                           "body": f"Siparişiniz bugün teslim edilecek #{i}"}).encode()
        return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(connections):
        s = socket.create_connection((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        s.sendall(b"".join(request() for _ in range(depth)))
        sel.register(s, selectors.EVENT_READ, {"pending": depth, "buf": b""})
        socks.append(s)
    statuses: dict[str, int] = {}
    start, answered = time.perf_counter(), 0
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for key, _ in sel.select(timeout=0.5):
            s, st = key.fileobj, key.data
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the target closed a connection")
            data = st["buf"] + chunk
            n = data.count(b"HTTP/1.1 ")
            for part in data.split(b"HTTP/1.1 ")[1:]:
                code = part[:3].decode(errors="replace") if len(part) >= 3 else "???"
                statuses[code] = statuses.get(code, 0) + 1
            st["buf"] = data[-8:]  # too short to hold a whole "HTTP/1.1 ", long enough to join a split one
            answered += n
            st["pending"] -= n
            if time.perf_counter() < deadline and n:
                s.sendall(b"".join(request() for _ in range(n)))
                st["pending"] += n
    elapsed = time.perf_counter() - start
    for s in socks:
        s.close()
    return {"answered": answered, "seconds": elapsed, "per_s": answered / elapsed, "statuses": statuses}


def measure(commit: str, http: str, args: argparse.Namespace) -> dict[str, Any]:
    with Pinned("providers", core=0) as providers, \
            Pinned("notifications", core=1, provider_url=providers.base, commit=commit, http=http,
                   extra=[] if args.deliver else ["--no-dispatch"]) as target:
        recipients = [f"bench-{i}" for i in range(50)]
        for i, rid in enumerate(recipients):
            r = requests.put(f"{target.url}/recipients/{rid}", json={"channels": ["push", "sms", "email"],
                             "push_token": f"tok{i}", "phone": f"+9055500{i:05d}", "email": f"b{i}@example.com"},
                             timeout=10)
            r.raise_for_status()
        pipelined_load(target.url, recipients, 1.0, args.connections, args.depth)  # warm-up
        t0 = time.time()
        out = pipelined_load(target.url, recipients, args.seconds, args.connections, args.depth)
        t1 = time.time()
        if args.deliver:  # did delivery keep up? the providers' record, over the same window
            calls = requests.get(f"{providers.base}/calls", timeout=60).json()["calls"]
            out["delivery_calls_per_s"] = sum(1 for c in calls if t0 <= c["at"] <= t1) / (t1 - t0)
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--depth", type=int, default=16, help="requests in flight per connection (pipelined)")
    p.add_argument("--deliver", action="store_true", help="keep the dispatcher on (deliveries included)")
    p.add_argument("--commit", choices=["each", "group", "both"], default="both")
    p.add_argument("--http", choices=["uvicorn", "lean", "both"], default="both",
                   help="the target's HTTP server (peakproof serve --http)")
    args = p.parse_args()
    print(f"reference notifications target on one core (taskset: {'yes' if shutil.which('taskset') else 'no'}), "
          f"{'delivering' if args.deliver else 'accept path alone'}; load: {args.connections} connections x "
          f"{args.depth} pipelined, {args.seconds:g} s")
    for commit in (["each", "group"] if args.commit == "both" else [args.commit]):
        for http in (["uvicorn", "lean"] if args.http == "both" else [args.http]):
            if commit == "each" and http == "lean" and args.commit == "both":
                continue  # the old path's figure is the before; lean is measured on the design's store
            r = measure(commit, http, args)
            delivered = (f"; provider calls in the same window {r['delivery_calls_per_s']:,.0f}/s"
                         if "delivery_calls_per_s" in r else "")
            print(f"  commit={commit:5s} http={http:7s}  {r['per_s']:8,.0f} answers/s  ({r['answered']:,} in "
                  f"{r['seconds']:.1f} s; statuses {r['statuses']}{delivered})")
    print("goal: >= 5,000 accepts/s on one core")


if __name__ == "__main__":
    main()
