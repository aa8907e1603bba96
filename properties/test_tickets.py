"""Case T invariants for ``pytest properties/``, handed over from the case's folder
(``peakproof/cases/tickets/properties.py``, where they live; imported here, its tests and fixtures are
collected here)."""

from peakproof.cases.tickets.properties import *  # noqa: F401,F403
