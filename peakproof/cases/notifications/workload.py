"""Case N, notifications: the peak minute's recipients and priorities (BI4)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PeakMinute:
    """``n`` recipients with a preferred channel drawn by the seed's shares (BI4), each with all
    three addresses (the cascade needs somewhere to go), and a priority.

    Faker provides names for the addresses, Turkish among them.
    """

    n: int
    seed: int = 20260730
    urgent_share: float = 0.3
    shares: tuple[float, float, float] = (0.55, 0.25, 0.20)

    def recipients(self) -> list[tuple[str, list[str], dict[str, str], str]]:
        """(recipient id, channel preference order, addresses, priority), reproducible."""
        return peak_minute(self.n, self.seed, self.urgent_share, self.shares)

    def describe(self) -> dict[str, Any]:
        return {"recipients": self.n, "urgent share": self.urgent_share,
                "preferred push / SMS / e-mail": "/".join(f"{s:.0%}" for s in self.shares), "seed": self.seed}


def peak_minute(n: int, seed: int = 20260730, urgent_share: float = 0.3,
                shares: tuple[float, float, float] = (0.55, 0.25, 0.20)) -> list[tuple[str, list[str], dict[str, str], str]]:
    """``n`` recipients with a preferred channel drawn by the seed's shares (BI4), each with all
    three addresses (the cascade needs somewhere to go), and a priority.

    Returns (recipient id, channel preference order, addresses, priority). Faker provides
    names for the addresses, Turkish among them.
    """
    from faker import Faker

    fake = Faker(["tr_TR", "en_US"])
    fake.seed_instance(seed)
    rnd = random.Random(seed)
    names = [fake.user_name() for _ in range(min(n, 2_000))]
    out = []
    order = ("push", "sms", "email")
    for i in range(n):
        u, pref = rnd.random(), "email"
        for ch, share in zip(order, shares):
            if u < share:
                pref = ch
                break
            u -= share
        channels = [pref] + [c for c in order if c != pref]
        name = f"{names[i % len(names)]}{i}"
        addresses = {"push_token": f"tok-{name}", "phone": f"+90555{i:07d}", "email": f"{name}@example.com"}
        out.append((f"r{i}", channels, addresses, "urgent" if rnd.random() < urgent_share else "reminder"))
    return out


def addressed_for_run(people: list[tuple[str, list[str], dict[str, str], str]],
                      run_id: str) -> list[tuple[str, list[str], dict[str, str], str]]:
    """The same recipients with addresses of this run's own: the seeded draw repeats from run to run, and a
    service that keeps a suppression list (an address a provider refused stays dead) met the last run's
    dead addresses on this run's recipients. Every address carries the run id (the phone, its digits)."""
    digits = int(hashlib.blake2b(run_id.encode(), digest_size=8).hexdigest(), 16) % 100_000
    out = []
    for i, (rid, channels, addresses, priority) in enumerate(people):
        name = addresses["email"].split("@", 1)[0]
        out.append((rid, channels, {"push_token": f"{addresses['push_token']}-{run_id}",
                                    "phone": f"+90{digits:05d}{i:07d}",
                                    "email": f"{name}.{run_id}@example.com"}, priority))
    return out
