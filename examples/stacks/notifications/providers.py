"""Calling the push / SMS / e-mail providers: what each accepts, and what each answer means.

200 delivered; 503 (or 429, or a refused connection) transient: try again later; 422 permanent:
that address is dead on that channel (it goes on the suppression list); no answer within the
answer timeout: unknown, maybe delivered, so the next call goes to the same channel with the same
``Idempotency-Key`` and the provider deduplicates.
"""

from __future__ import annotations

import html
import json
import os
import threading
import unicodedata

import requests

ADDRESS = {"push": "push_token", "sms": "phone", "email": "email"}

# -- formatting: what each provider accepts ----------------------------------------------------
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


def render(channel: str, title: str, body: str) -> dict:
    """The provider's message for ``channel``: SMS at most 3 segments, push title <= 100 characters and
    payload <= 4 KiB, e-mail a one-line subject <= 78 characters and an escaped HTML body."""
    if channel == "sms":
        text = _one_line(f"{title}: {body}" if title else body)
        enc, units = _sms_units(text)
        if units > 3 * (153 if enc == "GSM-7" else 67):
            text = text[:201]  # "…" is not GSM-7: a cut text is UCS-2, 201 units at most
            while text and _sms_units(text + "…")[1] > 201:
                text = text[:-1]
            text += "…"
            enc, units = _sms_units(text)
        single, multi = (160, 153) if enc == "GSM-7" else (70, 67)
        return {"text": text, "encoding": enc, "segments": 1 if units <= single else -(-units // multi)}
    if channel == "push":
        payload = {"title": _clip(_one_line(title), 100), "body": body}
        while (size := len(json.dumps(payload, ensure_ascii=False).encode())) > 4096:
            payload["body"] = _clip(payload["body"], max(0, len(payload["body"]) - max(1, (size - 4096) // 4) - 1))
        return payload
    return {"subject": _clip(_one_line(title), 78), "html": "<p>" + html.escape(body).replace("\n", "<br>") + "</p>"}


# -- the call -----------------------------------------------------------------------------------
_local = threading.local()


def _http() -> requests.Session:
    """One kept-alive session per worker process (prefork) or thread (the urgent pool's threads)."""
    session = getattr(_local, "session", None)
    if session is None or getattr(_local, "pid", None) != os.getpid():
        session = _local.session = requests.Session()
        _local.pid = os.getpid()
    return session


def send(base_url: str, channel: str, key: str, to: str, event_id: str, recipient_id: str, title: str, body: str,
         answer_timeout: float) -> str:
    """One provider call under ``key`` (``Idempotency-Key``): ``ok``, ``transient``, ``permanent`` or ``unknown``."""
    doc = {"to": to, "event_id": event_id, "recipient_id": recipient_id, "idempotency_key": key,
           "message": render(channel, title, body)}
    try:
        resp = _http().post(f"{base_url}/{channel}", json=doc, headers={"Idempotency-Key": key},
                            timeout=(answer_timeout, answer_timeout))
    except requests.ConnectTimeout:
        return "transient"  # never reached the provider
    except requests.Timeout:
        return "unknown"  # sent, no answer in time: maybe delivered
    except requests.ConnectionError as exc:
        # refused: never sent; a connection closed under us after the request went out: unknown
        return "transient" if "refused" in str(exc).lower() else "unknown"
    if 200 <= resp.status_code < 300:
        return "ok"
    if resp.status_code == 429 or resp.status_code >= 500:
        return "transient"
    return "permanent"
