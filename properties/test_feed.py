"""Case F invariants for ``pytest properties/``, handed over from the case's folder
(``peakproof/cases/feed/properties.py``, where they live; imported here, its tests and fixtures are
collected here)."""

from peakproof.cases.feed.properties import *  # noqa: F401,F403
