"""The lean HTTP/1.1 server (``--http lean``): what it must get right for a harness to trust it."""

from __future__ import annotations

import asyncio
import json
from typing import Any


from peakproof.targets._lean import LeanServer, _Connection



async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echoes method, path, query and body; ``/slow`` answers after the requests behind it."""
    body = (await receive())["body"]
    if scope["path"] == "/slow":
        await asyncio.sleep(0.05)
    if scope["path"] == "/boom":
        raise RuntimeError("a bug in the app")
    out = json.dumps({"method": scope["method"], "path": scope["path"], "query": scope["query_string"].decode(),
                      "body": body.decode()}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


async def _exchange(raw: bytes, max_body: int = 1 << 20) -> bytes:
    server = LeanServer(_app, max_body=max_body)
    srv = await asyncio.get_running_loop().create_server(lambda: _Connection(_app, server), "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = b""
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), 0.5)
            if not chunk:
                break
            data += chunk
    except asyncio.TimeoutError:
        pass
    writer.close()
    srv.close()
    await srv.wait_closed()
    return data


def exchange(raw: bytes, **kw: Any) -> bytes:
    return asyncio.run(_exchange(raw, **kw))


def _bodies(data: bytes) -> list[dict[str, Any]]:
    out = []
    for part in data.split(b"HTTP/1.1 ")[1:]:
        head, _, body = part.partition(b"\r\n\r\n")
        out.append({"status": int(head[:3]), "head": head.decode(), "body": body})
    return out


def test_pipelined_requests_are_answered_in_the_order_they_came_even_when_the_first_is_slowest() -> None:
    raw = (b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
           b"POST /fast?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
           b"GET /%C3%A7 HTTP/1.1\r\nHost: x\r\n\r\n")
    answers = _bodies(exchange(raw))
    assert [a["status"] for a in answers] == [200, 200, 200]
    docs = [json.loads(a["body"]) for a in answers]
    assert [d["path"] for d in docs] == ["/slow", "/fast", "/ç"]
    assert docs[1] == {"method": "POST", "path": "/fast", "query": "a=1", "body": "hello"}


def test_a_chunked_body_reaches_the_app_whole() -> None:
    raw = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert json.loads(_bodies(exchange(raw))[0]["body"])["body"] == "abcde"


def test_garbage_gets_a_400_in_the_contract_shape_and_the_connection_closes() -> None:
    answers = _bodies(exchange(b"NOT HTTP AT ALL\r\n\r\n"))
    assert answers[0]["status"] == 400 and "connection: close" in answers[0]["head"]
    assert json.loads(answers[0]["body"])["error"] == "invalid_request"


def test_a_body_over_the_limit_gets_a_413_and_is_not_buffered() -> None:
    raw = b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 100
    answers = _bodies(exchange(raw, max_body=10))
    assert answers[0]["status"] == 413 and json.loads(answers[0]["body"])["error"] == "body_too_large"


def test_http_1_0_without_keep_alive_closes_after_its_answer_and_an_app_bug_is_a_500() -> None:
    answers = _bodies(exchange(b"GET /boom HTTP/1.0\r\n\r\nGET /never HTTP/1.0\r\n\r\n"))
    assert len(answers) == 1 and answers[0]["status"] == 500 and "connection: close" in answers[0]["head"]
    assert "a bug in the app" in json.loads(answers[0]["body"])["message"]


def test_a_head_request_gets_the_headers_and_no_body_so_the_next_answer_is_not_misread() -> None:
    answers = _bodies(exchange(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /g HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert [a["status"] for a in answers] == [200, 200]
    assert answers[0]["body"] == b"" and "content-length" in answers[0]["head"]
    assert json.loads(answers[1]["body"])["path"] == "/g"
