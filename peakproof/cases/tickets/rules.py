"""The rules a tickets target states, which every check judges by (``--clock-skew``,
``--release-lag``, ``--retries-decide-afresh``, or a driver's ``tolerance`` attribute)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tolerance:
    """The rules a tickets target states, which the checks judge by.

    ``skew``: how far the target's clock may be from ours, s, either way (0 in virtual time).
    ``release_grace``: how long after a hold lapsed the target may still act on it, s: its
    expiry job's period (a shop that releases lapsed holds when a job runs sells them until
    then). None: not stated, the seed's rule: an expired hold is never sold, and its units
    come back within :data:`RELEASE_SLACK` (the harness's own slack for an asynchronous
    release). Stated, it is read by every check it concerns: the sale of a lapsed hold
    (``expired_hold_is_never_sold``) and the units' return.
    ``retries_decide_afresh``: the target decides every retry of an idempotency key anew. False
    (the default): a retry with the same key gets the key's first answer, a refusal included
    (Stripe's and the IETF draft's convention), so a refusal that repeats one already given
    for the key is a replay, not a new decision (``no_valid_rejection`` judges the first).
    """

    skew: float = 0.25
    release_grace: float | None = None
    retries_decide_afresh: bool = False

    def __post_init__(self) -> None:
        for name in ("skew", "release_grace"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v < 0):
                raise ValueError(f"Tolerance.{name} must be a number of seconds >= 0 (or None: not stated); got {v!r}")

    @property
    def sale_lag(self) -> float:
        """How long after its expiry (and the skew) a hold may still be sold: the stated release lag, else 0."""
        return self.release_grace or 0.0

    @property
    def release_slack(self) -> float:
        """How long after its expiry (and the skew) a hold's units may take to come back."""
        return RELEASE_SLACK if self.release_grace is None else self.release_grace

    def describe(self) -> dict[str, Any]:
        """The rules as judged by, for the verdict and the report."""
        return {"clock skew (s)": self.skew,
                "release lag (s)": (f"{self.release_grace:g}: a lapsed hold may still sell, and its units come back, "
                                    f"within it" if self.release_grace is not None else
                                    f"not stated: a lapsed hold is never sold (the seed's); its units come back "
                                    f"within {RELEASE_SLACK:g} s"),
                "retries under one idempotency key": ("decided afresh: every refusal is judged" if
                                                      self.retries_decide_afresh else
                                                      "get the key's first answer: a repeated refusal is a replay, "
                                                      "the first is judged")}


RELEASE_SLACK = 1.0  # s: when no release lag is stated, how late a lapsed hold's units may come back


def tolerance_of(driver: object, stated: dict[str, Any] | None = None) -> Tolerance:
    """The rules the checks judge by: those stated on the command line (``stated``: the spec's case
    options ``clock_skew``, ``release_lag``, ``retries_decide_afresh``) over the driver's
    ``tolerance`` attribute, over the defaults."""
    from dataclasses import replace

    tol = getattr(driver, "tolerance", None)
    base = tol if isinstance(tol, Tolerance) else Tolerance()
    given = {k: v for k, v in {"skew": (stated or {}).get("clock_skew"),
                               "release_grace": (stated or {}).get("release_lag"),
                               "retries_decide_afresh": (stated or {}).get("retries_decide_afresh") or None}.items()
             if v is not None}
    return replace(base, **given) if given else base
