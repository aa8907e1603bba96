"""Case N invariants for ``pytest properties/``, handed over from the case's folder
(``peakproof/cases/notifications/properties.py`` and the modules it gathers, where they live; imported
here, its tests and fixtures are collected here)."""

from peakproof.cases.notifications.properties import *  # noqa: F401,F403
