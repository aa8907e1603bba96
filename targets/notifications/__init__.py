"""Case N, notifications: the reference target (core, formatting, stores)."""

from .core import (CHANNELS, POLICIES, Attempt, BreakerConfig, Call, InvalidRequest, Notification, NotificationError,
                   NotificationsCore, Recipient, UnknownNotification, UnknownRecipient)
from .store import InMemoryStore, SqliteStore

__all__ = ["CHANNELS", "POLICIES", "Attempt", "BreakerConfig", "Call", "InvalidRequest", "Notification",
           "NotificationError", "NotificationsCore", "Recipient", "UnknownNotification", "UnknownRecipient",
           "InMemoryStore", "SqliteStore"]
