"""The reference tickets target behind a threaded proxy that holds each answer a while: a shop just started
(its first answers slow, then fast: a cold start) or one too slow at every rate.

Each connection gets a thread (keep-alive), which forwards the request to the reference (started here, on
another port) and answers after ``--cold-delay`` seconds for the first ``--cold-requests`` requests it serves
(``/health`` not counted) and after ``--delay`` seconds for every one after them. Holding an answer takes no
CPU and no lock: the delay is the shop's latency whatever the rate, up to what the proxy's threads take.

    python -m tests.support.delayed_tickets PORT [--cold-requests 30] [--cold-seconds S] [--cold-delay 0.12]
                                                 [--delay 0.005]

    a cold start:            --cold-requests 30 --cold-seconds 8 --cold-delay 0.12 --delay 0.005
    slow at every rate:      --cold-requests 0 --delay 0.12

Its processes: this one (it owns the socket) and the reference behind it.
"""

from __future__ import annotations

import argparse

from peakproof.cases import get_case
import http.client
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


def handler(backend: tuple[str, int], cold_requests: int, cold_delay: float, delay: float,
            cold_seconds: float = float("inf")) -> type:
    served = [0]
    first = [0.0]  # when the first counted request came
    count = threading.Lock()
    local = threading.local()

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # the head and the body go out in two writes: without this, a delayed ACK holds the body 40 ms
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: object) -> None:
            pass

        def _backend(self) -> http.client.HTTPConnection:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(*backend, timeout=30)
            return conn

        def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            for attempt in range(2):  # a kept-alive connection the reference closed: once more on a new one
                conn = self._backend()
                try:
                    conn.request(self.command, self.path, body or None,
                                 {k: v for k, v in self.headers.items() if k.lower() not in HOP})
                    answer = conn.getresponse()
                    return answer.status, answer.getheaders(), answer.read()
                except (http.client.HTTPException, OSError):
                    conn.close()
                    local.conn = None
                    if attempt:
                        raise
            raise AssertionError("unreachable")

        def _any(self) -> None:
            t0 = time.monotonic()
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            wait = delay
            if not self.path.rstrip("/").endswith("/health"):
                with count:
                    served[0] += 1
                    first[0] = first[0] or t0
                    # cold for the first requests, and never past the cold seconds: a generator that fell behind
                    # sends fewer, and a count alone then reached into a later ladder (CI)
                    if served[0] <= cold_requests and t0 - first[0] < cold_seconds:
                        wait = cold_delay
            status, headers, data = self._forward(body)
            left = wait - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)
            self.send_response(status)
            for k, v in headers:
                if k.lower() not in HOP and k.lower() not in ("server", "date"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _any

    return Forward


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--cold-requests", type=int, default=30)
    ap.add_argument("--cold-delay", type=float, default=0.12)
    ap.add_argument("--delay", type=float, default=0.005)
    ap.add_argument("--cold-seconds", type=float, default=float("inf"),
                    help="the cold start ends this long after the first counted request, whatever the count")
    args = ap.parse_args(argv)
    from peakproof.launch import ServedTarget

    with ServedTarget(get_case("tickets")) as backend:
        host, port = backend.url.split("//", 1)[1].split("/", 1)[0].split(":")
        ThreadingHTTPServer.daemon_threads = True
        ThreadingHTTPServer.request_queue_size = 2048
        server = ThreadingHTTPServer(("127.0.0.1", args.port),
                                     handler((host, int(port)), args.cold_requests, args.cold_delay, args.delay,
                                             args.cold_seconds))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print(f"delayed tickets on 127.0.0.1:{args.port}/tickets: the first {args.cold_requests} answers (within "
              f"{args.cold_seconds} s) after {args.cold_delay} s, then after {args.delay} s", flush=True)
        stop = [False]
        signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
        try:
            while not stop[0]:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()
            server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
