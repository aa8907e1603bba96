"""Beacon's settings: read from the environment by every process (gunicorn's workers, Celery's).

The launcher (``__main__.py``) sets them; a team would set them in its deployment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CHANNELS = ("push", "sms", "email")


@dataclass(frozen=True)
class Settings:
    database_url: str
    redis_url: str
    provider_url: str
    budget: int  # provider calls per notification at most
    backoff: float  # s before the next round after a transient failure or an answer that never came
    backoff_after_permanent: float  # s before the next round after a 422 (the next channel: no reason to wait)
    answer_timeout: float  # s a provider has to answer; after it the outcome is unknown (maybe delivered)
    breaker_window: int  # a channel's breaker looks at its last N calls (permanent answers excluded)...
    breaker_failures: int  # ...and opens at this many transient failures (or unanswered calls) among them
    breaker_cool_down: float  # s open before one probe
    defect: str  # "" or "visibility-timeout" or "replay-sends-twice"
    # the design (the seed's by default; a variant of its own: --channels sms,email --one-channel --no-breaker)
    channels: tuple[str, ...] = CHANNELS  # the channels it has: a preference for another is met on the next
    one_channel: bool = False  # a notification goes to one channel (the first it has of the recipient's): no cascade
    breaker: bool = True  # a breaker per channel

    @property
    def visibility_timeout(self) -> float:
        """Redis's redelivery window for unacknowledged messages. Celery's own advice: longer than
        the longest countdown / ETA. The defect sets it shorter than a round's countdown."""
        return self.backoff / 4 if self.defect == "visibility-timeout" else 3600.0


def load() -> Settings:
    env = os.environ
    return Settings(
        database_url=env["BEACON_DATABASE_URL"],
        redis_url=env["BEACON_REDIS_URL"],
        provider_url=env["BEACON_PROVIDER_URL"].rstrip("/"),
        budget=int(env.get("BEACON_BUDGET", "3")),
        backoff=float(env.get("BEACON_BACKOFF", "0.5")),
        backoff_after_permanent=float(env.get("BEACON_BACKOFF_AFTER_PERMANENT", "0.2")),
        answer_timeout=float(env.get("BEACON_ANSWER_TIMEOUT", "0.5")),
        breaker_window=int(env.get("BEACON_BREAKER_WINDOW", "20")),
        breaker_failures=int(env.get("BEACON_BREAKER_FAILURES", "8")),
        breaker_cool_down=float(env.get("BEACON_BREAKER_COOL_DOWN", "3")),
        defect=env.get("BEACON_DEFECT", ""),
        channels=tuple(c for c in CHANNELS if c in env.get("BEACON_CHANNELS", ",".join(CHANNELS)).split(",")),
        one_channel=env.get("BEACON_ONE_CHANNEL") == "1",
        breaker=env.get("BEACON_BREAKER", "1") == "1",
    )
