"""Ports of the seeds' models: back-of-envelope tables and simulations, exact to the printed digit.

One module per case, each with a ``Params`` dataclass (the seed's values as defaults),
``compute(params) -> dict`` (every figure) and ``render(result) -> str`` (the tables).
"""

from . import feed, notifications, tickets

CASES = {"tickets": tickets, "notifications": notifications, "feed": feed}
PARAMS = {"tickets": tickets.TicketsParams, "notifications": notifications.NotificationsParams,
          "feed": feed.FeedParams}
