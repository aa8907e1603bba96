"""A locustfile whose scenario has a bug: its perform raises on every 50th arrival (for the quality suite)."""

from __future__ import annotations

from typing import Any

from peakproof.cases.tickets.load import TicketsSoldOut
from peakproof.load.engine import OpenModelUser, ScenarioShape
from peakproof.load.scenario import scenario

__all__ = ["OpenModelUser", "ScenarioShape", "RaisingSoldOut"]


@scenario
class RaisingSoldOut(TicketsSoldOut):
    name = "tickets-sold-out-that-raises"
    description = "tickets-sold-out with a bug in the harness's own code"

    def perform(self, ctx: Any, a: Any) -> None:
        if a.data % 50 == 49:
            1 / 0  # noqa: B018 - the bug
        super().perform(ctx, a)
