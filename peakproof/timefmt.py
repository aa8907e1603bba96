"""Timestamps on the wire: the contracts emit RFC 3339 (UTC, microseconds); drivers accept
RFC 3339 or epoch seconds (HTTP services use both) and hand the checks epoch seconds."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


def parse_time(value: Any, field: str = "time") -> float:
    """RFC 3339 (with a zone) or epoch seconds -> epoch seconds; TypeError / ValueError say what came."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise TypeError(f"{field} must be an RFC 3339 string or epoch seconds, got {value!r:.60}")
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{field} must be RFC 3339 (e.g. 2026-11-30T18:00:00.123456Z), got {value!r:.60}") from None
    if dt.tzinfo is None:
        raise ValueError(f"{field} must carry a time zone (RFC 3339), got {value!r:.60}")
    return dt.timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds -> RFC 3339 in UTC with microseconds (what the contracts emit)."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def moment(t: float) -> str:
    """A moment for a sentence: the time of day in UTC to the millisecond for epoch seconds, or the
    seconds of a virtual clock (an in-process run's, which starts near 0)."""
    if t < 1e9:
        return f"t={t:,.3f} s (virtual clock)"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3] + " UTC"
