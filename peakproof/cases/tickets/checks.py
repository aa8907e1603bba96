"""The tickets checks, assembled: every promise module registers its checks on
:data:`~peakproof.cases.tickets.analysis.TICKETS`; importing them here fills the list, in the
order written (the stock invariants, then the promises on answers).

What the operations are and how uncertainty is treated: :mod:`peakproof.cases.tickets.analysis`.
"""

from __future__ import annotations

from typing import Iterable

from peakproof.checks import CheckResult
from peakproof.history import History, Op
from . import invariants, promises  # noqa: F401  (each registers its checks)
from .analysis import TICKETS, TicketsAnalysis
from .invariants import (expired_hold_is_never_sold, no_oversell, no_valid_rejection, reservation_is_idempotent,
                         stock_is_conserved, units_return_exactly_once)
from .promises import answers_belong_to_who_asked, hold_honoured_until_it_expires
from .rules import UNSTATED_RETURN_LAG, Tolerance, tolerance_of  # noqa: F401  (re-exported)

TICKETS_CHECKS = tuple(TICKETS)


def check_tickets(history: History | Iterable[Op], tolerance: Tolerance | None = None) -> list[CheckResult]:
    """Run every tickets invariant over one shared analysis of the history."""
    return TICKETS.run(TicketsAnalysis(history, tolerance or Tolerance()))


__all__ = ["TICKETS_CHECKS", "TicketsAnalysis", "check_tickets", "no_oversell", "stock_is_conserved",
           "no_valid_rejection", "reservation_is_idempotent", "expired_hold_is_never_sold", "units_return_exactly_once",
           "hold_honoured_until_it_expires", "answers_belong_to_who_asked", "Tolerance", "tolerance_of"]
