"""A slow staging box for the tickets case: the reference behind pre-forked workers with a per-request delay.

Like a shop behind gunicorn's sync workers on a small box: ``--workers`` processes share one listening
socket, each serves one connection at a time (HTTP/1.0: closed after each answer) and forwards the
request to the reference tickets target (started here, on another port) after ``--delay`` seconds.
A reservation (a hold) waits that long under a lock shared by the workers, as under a quota-row lock:
the box takes about ``1 / delay`` holds a second (20/s at the default 0.05 s), each answered in about
``delay`` while it keeps up; its other requests wait the delay side by side.

    python -m tests.support.slow_tickets PORT [--delay 0.05] [--workers 4]

Its processes: this one (it owns the socket), its workers, and the reference behind them.
"""

from __future__ import annotations

import argparse

from peakproof.cases import get_case
import fcntl
import http.client
import os
import signal
import socket
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


def worker(sock: socket.socket, backend: tuple[str, int], delay: float, lock_path: str) -> None:
    lock = open(lock_path, "w")

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: object) -> None:
            pass

        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hold = self.command == "POST" and self.path.rstrip("/").endswith("/reservations")
            if hold:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                time.sleep(delay)
                conn = http.client.HTTPConnection(*backend, timeout=30)
                conn.request(self.command, self.path, body or None,
                             {k: v for k, v in self.headers.items() if k.lower() not in HOP})
                answer = conn.getresponse()
                data = answer.read()
                conn.close()
            finally:
                if hold:
                    fcntl.flock(lock, fcntl.LOCK_UN)
            self.send_response(answer.status)
            for k, v in answer.getheaders():
                if k.lower() not in HOP and k.lower() not in ("server", "date"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _any

    server = HTTPServer(("127.0.0.1", 0), Forward, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args(argv)
    from peakproof.launch import ServedTarget

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)  # gunicorn's default backlog: a burst waits in the kernel, as it would there
    lock_path = os.path.join(tempfile.mkdtemp(prefix="slow-tickets-"), "lock")
    with ServedTarget(get_case("tickets")) as backend:
        host, port = backend.url.split("//", 1)[1].split("/", 1)[0].split(":")
        kids = []
        for _ in range(args.workers):
            pid = os.fork()
            if pid == 0:
                worker(sock, (host, int(port)), args.delay, lock_path)
                os._exit(0)
            kids.append(pid)
        print(f"slow tickets on 127.0.0.1:{args.port}/tickets: {args.workers} workers {kids}, delay {args.delay} s",
              flush=True)
        stop = [False]
        signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
        try:
            while not stop[0]:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            for pid in kids:
                os.kill(pid, signal.SIGTERM)
            for pid in kids:
                os.waitpid(pid, 0)
    sys.exit(0)


if __name__ == "__main__":
    main()
