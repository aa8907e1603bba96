"""The rules a feed target states about its order, which every feed check judges by
(``--time-precision``, ``--ties``).

A service orders its timeline by its own clock, which may be finer than the times it sends:
Django's JSON encoder cuts a datetime to milliseconds while the database orders by
microseconds. Two posts of one millisecond then come in the service's order, which the
harness cannot see. ``--time-precision S`` says the times sent are cut (or rounded) to S
seconds: posts whose times fall in one step of S may come in any order, and a page that
ends (or a cursor that starts) inside such a step vouches for none of its posts there.
``--ties any`` says the same of posts sent with one exact instant (the default,
``post_id``, is the contract's: ties by post id compared as strings, descending).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TIES = ("post_id", "any")


@dataclass(frozen=True)
class OrderRules:
    """How the target's times and ties read; the defaults are the contract's (exact times, ties by post id).
    And what its design, as stated (:data:`peakproof.cases.feed.case.DESIGN`), makes a read show: the defaults
    are the seed's (a write takes effect when it answers, a follow brings all the followee's posts in, a reader's
    own posts are not in their home timeline)."""

    time_precision: float = 0.0  # s: the times sent are cut to this step (0: exact as sent)
    ties: str = "post_id"  # the order of posts of one instant: "post_id" (descending, as strings) or "any"
    unfollow_lag: float = 0.0  # s after an unfollow answers that its author may still show (a worker applies it)
    delete_lag: float = 0.0  # s after a delete answers that its post may still show
    fanout_lag: float = 0.0  # s after a publish answers that its followers' timelines may still lack it
    follow_brings: "str | int" = "all"  # a follow brings the followee's earlier posts: "all", "nothing" or the last N
    own_posts: bool = False  # a reader's own posts are in their home timeline

    # flag, field, kind, help
    OPTIONS = (
        ("--time-precision", "time_precision", float,
         "s: the times your feed sends are cut to this step while it orders by a finer clock (Django's JSON: "
         "0.001); posts within one step may come in any order (default 0: times are exact)"),
        ("--ties", "ties", str,
         "the order of posts of one instant: 'post_id' (the contract's: descending, ids compared as strings) or "
         "'any' (your service orders them by something the harness cannot see)"),
    )

    def __post_init__(self) -> None:
        p = self.time_precision
        if not isinstance(p, (int, float)) or isinstance(p, bool) or p < 0 or p != p or p > 3600:
            raise ValueError(f"--time-precision must be a number of seconds from 0 to 3600 (0.001 for "
                             f"milliseconds); got {p!r}")
        if self.ties not in TIES:
            raise ValueError(f"--ties must be one of {', '.join(TIES)}; got {self.ties!r}")
        for flag, lag in (("--unfollow-lag", self.unfollow_lag), ("--delete-lag", self.delete_lag),
                          ("--fanout-lag", self.fanout_lag)):
            if not isinstance(lag, (int, float)) or isinstance(lag, bool) or not 0 <= lag <= 3600:
                raise ValueError(f"{flag} must be a number of seconds from 0 to 3600; got {lag!r}")
        b = self.follow_brings
        if not (b in ("all", "nothing") or (isinstance(b, int) and not isinstance(b, bool) and b >= 0)):
            raise ValueError(f"--follow-brings must be all, nothing or a number of posts (the last N); got {b!r}")

    @classmethod
    def from_options(cls, get: Any) -> "OrderRules":
        """From parsed options: ``get(field)`` returns the value or None (then the default stands)."""
        return cls(**{name: kind(get(name)) for _, name, kind, _ in cls.OPTIONS if get(name) is not None})

    def lag(self, f: str) -> float:
        """How long after a write of kind ``f`` answers that a read may still not show it (0: at once)."""
        return {"unfollow": self.unfollow_lag, "delete": self.delete_lag, "publish": self.fanout_lag}.get(f, 0.0)

    @property
    def ties_known(self) -> bool:
        """Every two posts of a page have one order the harness can name."""
        return self.time_precision == 0 and self.ties == "post_id"

    def step(self, t: float) -> float:
        """The step of S a time falls in (the time itself when times are exact)."""
        p = self.time_precision
        return round(float(t) / p) * p if p else float(t)

    def describe(self) -> dict[str, Any]:
        out = {"time precision (s)": self.time_precision or "exact as sent",
               "order of posts of one instant" + (" or one step" if self.time_precision else ""):
                   "by post id, descending (ids as strings)" if self.ties == "post_id" and not self.time_precision
                   else "any (the service's own order)"}
        if self != OrderRules(self.time_precision, self.ties):  # a design stated: what a read is held to then
            out.update({"an unfollow takes effect (s after it answers)": self.unfollow_lag or "at once",
                        "a delete takes effect (s after it answers)": self.delete_lag or "at once",
                        "a post reaches its followers' timelines (s after it answers)": self.fanout_lag or "at once",
                        "a follow brings the followee's earlier posts": self.follow_brings if isinstance(
                            self.follow_brings, str) else f"the last {self.follow_brings}",
                        "a reader's own posts in their timeline": "shown" if self.own_posts else "not shown"})
        return out


CONTRACT = OrderRules()
