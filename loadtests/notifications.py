"""Case N's load scenarios for ``locust -f loadtests/``, handed over from the case's folder
(``peakproof/cases/notifications/load.py``, where they live)."""

from peakproof.cases.notifications.load import *  # noqa: F401,F403  (the scenarios register on import)
from peakproof.cases.notifications.load import __all__  # noqa: F401
