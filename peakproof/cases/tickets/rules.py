"""The rules a tickets target states, which every check judges by (``--clock-skew``,
``--release-lag``, ``--retries-decide-afresh``, or a driver's ``tolerance`` attribute)."""

from __future__ import annotations

from dataclasses import InitVar, dataclass
from typing import Any


@dataclass(frozen=True)
class Tolerance:
    """The rules a tickets target states, which the checks judge by.

    ``skew``: how far the target's clock may be from ours, s, either way (0 in virtual time).
    ``release_lag`` (``--release-lag``): how long after a hold lapsed the target may still act on
    it, s: its expiry job's period (a shop that releases lapsed holds when a job runs sells them
    until then). None: not stated, the seed's rule: an expired hold is never sold, and its units
    come back within :data:`UNSTATED_RETURN_LAG` (the harness's own slack for an asynchronous
    release). Stated, it is read by every check it concerns, as :attr:`sale_lag` (the sale of a
    lapsed hold, ``expired_hold_is_never_sold``) and :attr:`return_lag` (the units' return).
    ``release_grace``: its earlier name (a driver's ``Tolerance(release_grace=3)`` still works).
    ``retries_decide_afresh``: the target decides every retry of an idempotency key anew. False
    (the default): a retry with the same key gets the key's first answer, a refusal included
    (Stripe's and the IETF draft's convention), so a refusal that repeats one already given
    for the key is a replay, not a new decision (``no_valid_rejection`` judges the first).
    """

    skew: float = 0.25
    release_lag: float | None = None
    retries_decide_afresh: bool = False
    release_grace: InitVar[float | None] = None  # release_lag's earlier name, for drivers written before

    def __post_init__(self, release_grace: float | None) -> None:
        if release_grace is not None:
            if self.release_lag is not None and self.release_lag != release_grace:
                raise ValueError(f"Tolerance: release_lag={self.release_lag!r} and release_grace={release_grace!r} "
                                 "(its earlier name) disagree; give release_lag alone")
            object.__setattr__(self, "release_lag", release_grace)
        for name in ("skew", "release_lag"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v < 0):
                raise ValueError(f"Tolerance.{name} must be a number of seconds >= 0 (or None: not stated); got {v!r}")

    @property
    def sale_lag(self) -> float:
        """How long after its expiry (and the skew) a hold may still be sold: the stated release lag, else 0."""
        return self.release_lag or 0.0

    @property
    def return_lag(self) -> float:
        """How long after its expiry (and the skew) a hold's units may take to come back: the stated release
        lag, else :data:`UNSTATED_RETURN_LAG`."""
        return UNSTATED_RETURN_LAG if self.release_lag is None else self.release_lag

    def describe(self) -> dict[str, Any]:
        """The rules as judged by, for the verdict and the report."""
        return {"clock skew (s)": self.skew,
                "release lag (s)": (f"{self.release_lag:g}: a lapsed hold may still sell, and its units come back, "
                                    f"within it" if self.release_lag is not None else
                                    f"not stated: a lapsed hold is never sold (the seed's); its units come back "
                                    f"within {UNSTATED_RETURN_LAG:g} s"),
                "retries under one idempotency key": ("decided afresh: every refusal is judged" if
                                                      self.retries_decide_afresh else
                                                      "get the key's first answer: a repeated refusal is a replay, "
                                                      "the first is judged")}


UNSTATED_RETURN_LAG = 1.0  # s: when no release lag is stated, how late a lapsed hold's units may come back


def tolerance_of(driver: object, stated: dict[str, Any] | None = None) -> Tolerance:
    """The rules the checks judge by: those stated on the command line (``stated``: the spec's case
    options ``clock_skew``, ``release_lag``, ``retries_decide_afresh``) over the driver's
    ``tolerance`` attribute, over the defaults."""
    from dataclasses import replace

    tol = getattr(driver, "tolerance", None)
    base = tol if isinstance(tol, Tolerance) else Tolerance()
    given = {k: v for k, v in {"skew": (stated or {}).get("clock_skew"),
                               "release_lag": (stated or {}).get("release_lag"),
                               "retries_decide_afresh": (stated or {}).get("retries_decide_afresh") or None}.items()
             if v is not None}
    return replace(base, **given) if given else base
