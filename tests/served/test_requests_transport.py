"""The requests transport reads the environment's HTTP settings once per origin, and still obeys them:
a proxy the environment names is used, one NO_PROXY excludes is not."""

from __future__ import annotations

import pytest

from peakproof.http import RequestsTransport, TransportError


def test_a_proxy_named_by_the_environment_is_still_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: nothing listens, a refusal
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    transport = RequestsTransport(timeout=2)
    with pytest.raises(TransportError) as refused:
        transport("GET", "http://example.invalid/health", None, {}, "health")  # never resolved: the proxy is asked
    assert "ProxyError" in str(refused.value) or "refused" in str(refused.value).lower()


def test_the_environment_is_read_once_per_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    transport = RequestsTransport(timeout=2)
    first = transport._settings("http://127.0.0.1:8000/tickets/quotas/a")
    assert first["proxies"] == {}  # NO_PROXY: straight to the target
    monkeypatch.setenv("NO_PROXY", "")
    assert transport._settings("http://127.0.0.1:8000/tickets/quotas/b") is first  # read once for the origin
    assert transport._settings("http://example.invalid/x")["proxies"] == {"http": "http://127.0.0.1:9"}
