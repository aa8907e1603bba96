"""Case F's load scenarios for ``locust -f loadtests/``, handed over from the case's folder
(``peakproof/cases/feed/load.py``, where they live)."""

from peakproof.cases.feed.load import *  # noqa: F401,F403  (the scenarios register on import)
from peakproof.cases.feed.load import __all__  # noqa: F401
