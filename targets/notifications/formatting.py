"""Per-channel formatting that respects each channel's limits, for any Unicode text.

* SMS: GSM-7 when every character is in the GSM 03.38 basic set or its extension
  (extension characters take two septets), else UCS-2 (UTF-16 code units). Single
  messages hold 160 septets / 70 units; concatenated ones 153 / 67 per segment. Turkish
  text usually needs UCS-2: GSM-7 lacks ğ, ş, ı, İ and lower-case ç.
* Push: title at most 100 characters; the JSON payload at most 4,096 bytes of UTF-8.
* E-mail: subject on one line (no CR/LF: no header injection), at most 78 characters;
  the body HTML-escaped.
"""

from __future__ import annotations

import html
import json
import unicodedata

GSM7_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà")
GSM7_EXTENSION = set("^{}\\[~]|€\f")

SMS_MAX_SEGMENTS = 3
PUSH_TITLE_MAX = 100
PUSH_PAYLOAD_MAX = 4096
EMAIL_SUBJECT_MAX = 78
ELLIPSIS = "…"


def sms_encoding(text: str) -> str:
    return "GSM-7" if all(c in GSM7_BASIC or c in GSM7_EXTENSION for c in text) else "UCS-2"


def sms_units(text: str, encoding: str) -> int:
    if encoding == "GSM-7":
        return sum(2 if c in GSM7_EXTENSION else 1 for c in text)
    return len(text.encode("utf-16-le")) // 2


def sms_segments(text: str) -> tuple[str, int]:
    """(encoding, segments) of an SMS text."""
    enc = sms_encoding(text)
    units = sms_units(text, enc)
    single, multi = (160, 153) if enc == "GSM-7" else (70, 67)
    if units <= single:
        return enc, 1
    return enc, -(-units // multi)


def format_sms(title: str, body: str) -> dict[str, object]:
    text = _one_line(f"{title}: {body}" if title else body)
    enc = sms_encoding(text)
    limit = SMS_MAX_SEGMENTS * (153 if enc == "GSM-7" else 67)
    if sms_units(text, enc) > limit:
        # cut on whole characters (never half a surrogate pair), then mark the cut
        if sms_encoding(ELLIPSIS) != enc:
            enc = "UCS-2"
            limit = SMS_MAX_SEGMENTS * 67
        while text and sms_units(text + ELLIPSIS, enc) > limit:
            text = text[:-1]
        text += ELLIPSIS
    enc, segments = sms_segments(text)
    return {"text": text, "encoding": enc, "segments": segments}


def format_push(title: str, body: str) -> dict[str, object]:
    title = _clip(_one_line(title), PUSH_TITLE_MAX)
    payload = {"title": title, "body": body}
    while len(json.dumps(payload, ensure_ascii=False).encode()) > PUSH_PAYLOAD_MAX:
        over = len(json.dumps(payload, ensure_ascii=False).encode()) - PUSH_PAYLOAD_MAX
        payload["body"] = _clip(payload["body"], max(0, len(payload["body"]) - max(1, over // 4) - 1))
    return payload


def format_email(title: str, body: str) -> dict[str, object]:
    subject = _clip(_one_line(title), EMAIL_SUBJECT_MAX)
    return {"subject": subject, "html": "<p>" + html.escape(body).replace("\n", "<br>") + "</p>"}


FORMATTERS = {"push": format_push, "sms": format_sms, "email": format_email}


def _one_line(text: str) -> str:
    # CR, LF and other line/paragraph separators become spaces; control characters go
    return " ".join("".join(c if unicodedata.category(c)[0] != "C" else " " for c in text).split())


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS
