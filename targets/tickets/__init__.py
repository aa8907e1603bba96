"""Case T, tickets and stock: the reference target (core, stores, HTTP app, server)."""

from .core import (POLICIES, Busy, Cancelled, Contention, Expired, IdempotencyKeyReused, InvalidRequest,
                   LeaseLock, QuotaRow, Reservation, SoldOut, TicketError, TicketsCore, UnknownQuota,
                   UnknownReservation)
from .store import InMemoryStore, SqliteStore

__all__ = ["POLICIES", "Busy", "Cancelled", "Contention", "Expired", "IdempotencyKeyReused", "InvalidRequest",
           "LeaseLock", "QuotaRow", "Reservation", "SoldOut", "TicketError", "TicketsCore", "UnknownQuota",
           "UnknownReservation", "InMemoryStore", "SqliteStore"]
