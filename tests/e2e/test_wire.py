"""The load engine's HTTP client and its batched Locust statistics.

The wire client must turn every way a server can answer (or fail to) into the same outcome
the slower clients give: an answer, or refused / timeout / reset / error. The batched
statistics must equal what Locust's own per-request logging keeps.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable

import pytest

from peakproof.http import TransportError
from peakproof.load.wire import WireClient


class RawServer:
    """A loopback server whose every connection is handled by ``handle(conn)`` in a thread."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.handle = handle
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


def read_request(conn: socket.socket) -> bytes:
    """One request with a Content-Length body (what the wire client sends), or b'' at the end."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(4096)
    return head + b"\r\n\r\n" + body


@pytest.fixture
def serve():
    servers: list[RawServer] = []

    def start(handle: Callable[[socket.socket], None]) -> RawServer:
        servers.append(RawServer(handle))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def keep_alive_echo(conn: socket.socket) -> None:
    while True:
        req = read_request(conn)
        if not req:
            return
        body = req.partition(b"\r\n\r\n")[2] or b"{}"
        conn.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
def test_answers_come_back_whole_over_one_kept_alive_connection(serve) -> None:
    server = serve(keep_alive_echo)
    client = WireClient("127.0.0.1", server.port, 4, 2.0)
    for i in range(20):
        body = b'{"n": %d}' % i
        assert client.request("POST", "/q/reservations", body, {"Content-Type": "application/json"}) == (409, body)
    assert server.connections == 1


def header_echo(conn: socket.socket) -> None:
    """Answers each request with the value of its X-Echo header, as received."""
    while True:
        req = read_request(conn)
        if not req:
            return
        head = req.partition(b"\r\n\r\n")[0].split(b"\r\n")
        value = next((line.split(b":", 1)[1].strip() for line in head if line.lower().startswith(b"x-echo:")), b"")
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(value), value))
def test_each_request_carries_its_own_header_values_whatever_dict_came_before(serve) -> None:
    # The callers build a headers dict a request (peakproof.http.call); a freed dict's id is reused at
    # once, so a head cached by id() sent one request's Idempotency-Key with the next request.
    import gevent

    client = WireClient("127.0.0.1", serve(header_echo).port, 8, 5.0)
    sent: list[tuple[bytes, bytes]] = []

    def one(i: int) -> None:
        value = f"key-{i}-{i * 7919 % 1000}".encode()
        headers = {"Content-Type": "application/json", "X-Echo": value.decode()}  # a new dict each time
        sent.append((value, client.request("POST", "/q/reservations", b"{}", headers)[1]))

    for start in range(0, 2_000, 200):
        gevent.joinall([gevent.spawn(one, i) for i in range(start, start + 200)])
    stale = [(want, got) for want, got in sent if want != got]
    assert len(sent) == 2_000 and not stale, f"{len(stale)} of {len(sent)} requests carried another request's header: {stale[:3]}"
def test_a_chunked_answer_and_an_answer_delimited_by_the_close_are_read_whole(serve) -> None:
    def chunked_then_close(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        read_request(conn)
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")

    server = serve(chunked_then_close)
    client = WireClient("127.0.0.1", server.port, 1, 2.0)
    assert client.request("GET", "/", None, {}) == (200, b"abcde")
    assert client.request("GET", "/", None, {}) == (200, b"until the end")
    assert server.connections == 1 and not client.idle  # the close ended it: it is not kept for reuse
@pytest.mark.parametrize("answer, kind", [
    (b"", "reset"),  # closed before any answer: the outcome is unknown
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "reset"),  # closed mid-body
    (b"SMTP ready\r\n\r\n", "error"),  # not HTTP at all
])
def test_a_broken_answer_is_an_outcome_never_a_crash(serve, answer: bytes, kind: str) -> None:
    def broken(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(answer)

    client = WireClient("127.0.0.1", serve(broken).port, 1, 2.0)
    with pytest.raises(TransportError) as e:
        client.request("POST", "/", b"{}", {})
    assert e.value.kind == kind
def test_silence_is_a_timeout_and_a_closed_port_is_refused(serve) -> None:
    def silent(conn: socket.socket) -> None:
        read_request(conn)
        conn.recv(1)  # never answers; returns when the client gives up

    client = WireClient("127.0.0.1", serve(silent).port, 1, 0.3)
    with pytest.raises(TransportError) as e:
        client.request("POST", "/", b"{}", {})
    assert e.value.kind == "timeout"
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(TransportError) as e:
        WireClient("127.0.0.1", port, 1, 0.3).request("GET", "/", None, {})
    assert e.value.kind == "refused"
def test_a_connection_the_server_closed_while_idle_is_replaced_not_reported(serve, monkeypatch) -> None:
    import peakproof.load.wire as wire

    def one_answer_then_close(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # says keep-alive, then closes

    monkeypatch.setattr(wire, "IDLE_CHECK_SECONDS", 0.0)
    server = serve(one_answer_then_close)
    client = WireClient("127.0.0.1", server.port, 1, 2.0)
    assert client.request("GET", "/", None, {}) == (200, b"ok")
    import gevent

    gevent.sleep(0.1)  # the server's close arrives
    assert client.request("GET", "/", None, {}) == (200, b"ok")
    assert server.connections == 2
def test_batched_statistics_equal_locust_s_own_per_request_log() -> None:
    # in a child process: importing locust monkey-patches the standard library, which must not
    # leak into this pytest run
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", STATS_EQUIVALENCE], capture_output=True, text=True, timeout=60,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fields equal: 9 x 3 entries; errors equal: 1" in done.stdout


STATS_EQUIVALENCE = """
import unittest.mock as mock
from locust.stats import RequestStats
from peakproof.load.transport import bulk_log

rows = [("POST", "POST reserve", rt, length, None, 1000.0 + i / 7)
        for i, (rt, length) in enumerate([(0.4, 72), (3.7, 72), (147.2, 10), (3432.0, 0), (58760.5, 72)] * 9)]
rows += [("GET", "GET quota", 12.5, 80, None, 1003.0), ("POST", "POST reserve", 9.0, 0, "HTTP 500", 1007.5)]
one, bulk = RequestStats(use_response_times_cache=True), RequestStats(use_response_times_cache=True)
for method, name, rt, length, error, at in rows:
    with mock.patch("time.time", return_value=at):
        one.log_request(method, name, rt, length)
    if error:
        one.log_error(method, name, RuntimeError(error))
bulk_log(bulk, rows)
fields = ("num_requests", "num_failures", "total_response_time", "min_response_time", "max_response_time",
          "response_times", "num_reqs_per_sec", "total_content_length", "last_request_timestamp")
entries = list(one.entries) + ["total"]
for key in entries:
    a = one.total if key == "total" else one.entries[key]
    b = bulk.total if key == "total" else bulk.entries[key]
    for f in fields:
        want, got = getattr(a, f), getattr(b, f)
        close = abs(got - want) < 1e-6 * max(1.0, abs(want)) if isinstance(want, float) else got == want
        assert close, (key, f, want, got)
errors = {k: e.occurrences for k, e in bulk.errors.items()}
assert errors == {k: e.occurrences for k, e in one.errors.items()}, errors
print(f"fields equal: {len(fields)} x {len(entries)} entries; errors equal: {len(errors)}")
"""
@pytest.mark.parametrize("entry", ["peakproof run", "locust -f loadtests/"])
def test_a_driver_s_per_request_headers_reach_the_target_intact_at_load(entry: str, tmp_path) -> None:
    # The whole road: a driver's own header on each reservation (tests/support/echo.py), through the
    # engine's transport and wire client, to a served reference that compares it with the body.
    import subprocess
    import sys

    import requests

    from tests.support.echo import ECHO_HEADER
    from tests.support.locust_run import ROOT, run_locust
    from tests.support.mutants import served

    driver = "tests/support/echo.py:EchoTickets"
    with served("tickets-checks-echo") as t:
        if entry == "peakproof run":
            proc = subprocess.run([sys.executable, "-m", "peakproof", "run", "tickets", "--target-url", t.url,
                                   "--driver", driver, "--skip-properties", "--scale", "0.05", "--calibrated-rate", "20000",
                                   "--report-dir", str(tmp_path)],
                                  capture_output=True, text=True, timeout=300, cwd=ROOT)
            out = proc.stdout + proc.stderr
        else:
            _, _, out = run_locust(t.url, "tickets-opening", tmp_path, "--scale", "0.05", "--driver", driver)
        echo = requests.get(f"{t.url}/_echo", timeout=5).json()
    print(f"\n{entry}: {ECHO_HEADER} right {echo['right']:,}, stale {echo['stale']:,}, missing {echo['missing']:,}")
    assert echo["right"] >= 1_000, f"the load sent too few reservations to judge: {echo}\n{out[-3000:]}"
    assert echo["stale"] == 0 and echo["missing"] == 0, echo
