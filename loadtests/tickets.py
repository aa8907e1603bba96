"""Case T's load scenarios for ``locust -f loadtests/``, handed over from the case's folder
(``peakproof/cases/tickets/load.py``, where they live).

    locust -f loadtests/ --headless --host http://127.0.0.1:8000/tickets \\
        --scenario tickets-opening --scale 0.1 --time-scale 24
"""

from peakproof.cases.tickets.load import *  # noqa: F401,F403  (the scenarios register on import)
from peakproof.cases.tickets.load import __all__  # noqa: F401
