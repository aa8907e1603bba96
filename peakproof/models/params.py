"""The seeds' parameters, one dataclass per case, each field with the seed's value and its id
(BS = tickets, BI = notifications, VH = feed). The models in ``tickets.py``,
``notifications.py`` and ``feed.py`` compute from these; each case's ``Case.model_params``
names its class (``peakproof models`` builds its options from it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .common import Params, param_field

CHANNELS = ("push", "sms", "email")  # the notification channels, in the seed's order


# -- tickets -----------------------------------------------------------------------------------


@dataclass
class TicketsParams(Params):
    quota: int = param_field(5_000, "BS1: items on sale")
    opening_requests: int = param_field(200_000, "BS2: requests at the opening")
    opening_seconds: float = param_field(10.0, "BS2: length of the opening, s")
    items_per_request: float = param_field(1.4, "BS3: mean items per request")
    window: int = param_field(120, "BS4: reservation window, s (must be one of the windows)")
    windows: list[int] = param_field([30, 120, 300], "BS5: windows compared, s")
    conversion: list[float] = param_field([0.45, 0.65, 0.72], "BS5: share converted to sale, per window")
    record_bytes: int = param_field(64, "BS7: stock record size")
    requests: int = param_field(20_000, "contention model: requests in the queue")
    workers: int = param_field(16, "BS6: concurrent writers on the quota row")
    retry_budget: int = param_field(3, "BS8: optimistic retry budget")
    p_single: float = param_field(0.6, "contention model: share of requests asking 1 item (else 2)")
    worker_counts: list[int] = param_field([2, 4, 16], "worker counts in the sensitivity table")
    seed: int = param_field(20260730, "generator seed")

    def __post_init__(self) -> None:
        if len(self.windows) != len(self.conversion):
            raise ValueError(f"windows and conversion must pair up; got {len(self.windows)} windows and "
                             f"{len(self.conversion)} conversion shares")
        if self.window not in self.windows:
            raise ValueError(f"window must be one of the windows {self.windows}; got {self.window}")
        if self.workers < 1 or self.requests < 0 or self.quota < 0 or min(self.worker_counts, default=1) < 1:
            raise ValueError("workers and worker counts must be >= 1, quota and requests >= 0")


# -- notifications -----------------------------------------------------------------------------


@dataclass
class NotificationsParams(Params):
    recipients: int = param_field(5_000_000, "BI1: daily active recipients")
    per_recipient: float = param_field(6, "BI2: notifications per recipient per day")
    peak_factor: float = param_field(5, "BI3: peak factor")
    share: list[float] = param_field([0.55, 0.25, 0.20], "BI4: preference share push / sms / email")
    transient: list[float] = param_field([0.05, 0.02, 0.01], "BI5: transient failure per call")
    permanent: list[float] = param_field([0.06, 0.02, 0.01], "BI6: permanent failure per address")
    record_bytes: int = param_field(300, "BI7: notification record")
    budget: int = param_field(3, "BI8: attempt budget (external calls per notification)")
    backoff: float = param_field(30, "BI9: wait between attempts, s")
    threshold: float = param_field(0.99, "delivery ratio threshold")
    notifications: int = param_field(104_167, "channel-order model: notifications (one peak minute)")
    multipliers: list[float] = param_field([1, 2, 3], "failure-rate multipliers in the sensitivity table")
    down: str = param_field("push", "channel forced down in the failure table (push, sms or email)")
    seed: int = param_field(20260730, "generator seed")

    def __post_init__(self) -> None:
        for name in ("share", "transient", "permanent"):
            if len(getattr(self, name)) != len(CHANNELS):
                raise ValueError(f"{name} needs one value per channel ({', '.join(CHANNELS)}); "
                                 f"got {getattr(self, name)}")
        if self.down not in CHANNELS:
            raise ValueError(f"down must be one of {', '.join(CHANNELS)}; got {self.down!r}")
        if self.notifications < 1 or self.budget < 0:
            raise ValueError("notifications must be >= 1 and budget >= 0")


# -- feed --------------------------------------------------------------------------------------


@dataclass
class FeedParams(Params):
    users: int = param_field(1_000_000, "VH1: daily active users")
    posts_per_user: float = param_field(0.2, "VH2: posts per user per day")
    feed_requests: float = param_field(8, "VH3: feed requests per user per day")
    peak_factor: float = param_field(3, "VH4: peak factor")
    pareto_base: float = param_field(33, "VH5: Pareto base of the follower distribution")
    pareto_exponent: float = param_field(1.16, "VH5: Pareto exponent")
    inbox_entries: int = param_field(400, "VH6: inbox entries kept per user")
    entry_bytes: int = param_field(32, "VH7: bytes per inbox entry")
    window: float = param_field(60, "G2: visibility window, s")
    capacity_factor: float = param_field(3, "fan-out capacity as a multiple of the steady write rate")
    thresholds: list[int] = param_field([1000, 10_000, 84_846], "thresholds compared (the computed one and "
                                        "'users' are added)")
    consumer_rates: list[float] = param_field([1200, 1000, 700], "slowed fan-out consumer, inbox writes/s")
    seed: int = param_field(20260730, "generator seed (MINSTD)")

    def __post_init__(self) -> None:
        if self.users < 2 or self.pareto_exponent <= 0 or self.pareto_base <= 0 or self.window <= 0:
            raise ValueError("users must be >= 2; Pareto base, exponent and the window must be > 0")
        if self.seed % (2**31 - 1) == 0:
            raise ValueError("the seed must not be a multiple of 2^31-1 (MINSTD would stay at 0)")
