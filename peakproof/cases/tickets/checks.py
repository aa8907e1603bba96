"""The tickets checks, assembled: every promise module registers its checks on
:data:`~peakproof.cases.tickets.analysis.TICKETS`; importing them here fills the list, in the
order written (the stock invariants, then the promises on answers).

The tickets invariants, as pure functions of a history.

Operation names (``Op.f``) and their values, as every tickets driver records them:

* ``put_quota`` args {quota_id, capacity, hold_seconds}; ok value: the quota dict.
* ``read_quota`` args {quota_id}; ok value {capacity, available, held, sold}.
* ``reserve`` args {quota_id, buyer_id, quantity, request_id}; ok value: the reservation
  dict with ``expires_at`` as epoch seconds on the target's clock; fail value: error code.
* ``confirm`` / ``cancel`` / ``get_reservation`` args {reservation_id}.

How uncertainty is treated (the honest part): every reservation has a *certain* interval
(from the completion of an ok reserve until the first cancel could have begun or the hold
certainly lapsed) and a *possible* interval (from the first invocation that may have
created it, including ``info`` ones whose outcome is unknown, until its release is
certain). An oversell needs certain holds beyond capacity; a valid rejection needs free
stock under the *possible* holds. Wall-clock comparisons with the target's ``expires_at``
allow ``skew`` seconds either way, and a target gets ``release_grace`` seconds after an
expiry to put the units back.
"""

from __future__ import annotations

from typing import Iterable

from ...checks import CheckResult
from ...history import History, Op
from . import invariants, promises  # noqa: F401  (each registers its checks)
from .analysis import TICKETS, TicketsAnalysis
from .invariants import (expired_hold_is_never_sold, no_oversell, no_valid_rejection, reservation_is_idempotent,
                         stock_is_conserved, units_return_exactly_once)
from .promises import answers_belong_to_who_asked, hold_honoured_until_it_expires
from .rules import RELEASE_SLACK, TicketRules, Tolerance, tolerance_of  # noqa: F401  (re-exported)

TICKETS_CHECKS = tuple(TICKETS)


def check_tickets(history: History | Iterable[Op], tolerance: Tolerance | None = None) -> list[CheckResult]:
    """Run every tickets invariant over one shared analysis of the history."""
    return TICKETS.run(TicketsAnalysis(history, tolerance or Tolerance()))


__all__ = ["TICKETS_CHECKS", "TicketsAnalysis", "check_tickets", "no_oversell", "stock_is_conserved",
           "no_valid_rejection", "reservation_is_idempotent", "expired_hold_is_never_sold", "units_return_exactly_once",
           "hold_honoured_until_it_expires", "answers_belong_to_who_asked", "Tolerance", "TicketRules", "tolerance_of"]
