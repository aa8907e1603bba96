"""Case T, tickets: ``driver`` (the protocol and its drivers), ``workload`` (the opening),
``checks`` (the eight invariants over one :class:`TicketsAnalysis`)."""

from .checks import (TICKETS_CHECKS, TicketsAnalysis, Tolerance, answers_belong_to_who_asked, check_tickets,
                     expired_hold_is_never_sold, hold_honoured_until_it_expires,
                     no_oversell, no_valid_rejection, reservation_is_idempotent, stock_is_conserved, tolerance_of,
                     units_return_exactly_once)
from .driver import HttpTickets, InProcessTickets, TicketsDriver, parse_quota, parse_reservation
from .workload import OpeningWorkload, buyer_names, concurrent_burst, interleaved_reservations, replay_opening

__all__ = ["TicketsDriver", "InProcessTickets", "HttpTickets", "parse_quota", "parse_reservation",
           "OpeningWorkload", "buyer_names", "replay_opening", "concurrent_burst", "interleaved_reservations",
           "TICKETS_CHECKS", "TicketsAnalysis", "Tolerance", "tolerance_of", "check_tickets", "no_oversell", "stock_is_conserved",
           "no_valid_rejection", "reservation_is_idempotent", "expired_hold_is_never_sold",
           "units_return_exactly_once", "hold_honoured_until_it_expires", "answers_belong_to_who_asked"]

# what the property fixtures build (peakproof.pytest_plugin.Target)
PROTOCOL, IN_PROCESS, OVER_HTTP = TicketsDriver, InProcessTickets, HttpTickets

from .case import CASE  # noqa: E402  (the registry reads it)
