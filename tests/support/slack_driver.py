"""A tickets driver for a target whose clock may be 1.5 s off ours: wider than the 0.5 s hold window the
URL properties use, so no confirm can be judged early or late (the properties must say so, and how to fix it)."""

from __future__ import annotations

from peakproof.cases.tickets.checks import Tolerance
from peakproof.cases.tickets.driver import HttpTickets


class WideSlackTickets(HttpTickets):
    tolerance = Tolerance(skew=1.5)
