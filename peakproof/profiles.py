"""The Hypothesis profiles peakproof's properties run under, chosen by ``HYPOTHESIS_PROFILE``.

``dev`` (the default), ``ci`` (derandomized: every run draws the same steps; no example database
written into the repository; reproduction blobs printed) and ``thorough``. They are registered as
``peakproof-dev`` and so on, so a team's own profiles of the same names stay theirs; they are
loaded only where peakproof's properties run (their ``conftest.py``, the checkout's), never by
the plugin in a session of someone else's tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, settings

PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=50, deadline=None, stateful_step_count=30),
    "ci": settings(max_examples=60, deadline=None, derandomize=True, database=None, print_blob=True,
                   stateful_step_count=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]),
    "thorough": settings(max_examples=1_000, deadline=None, stateful_step_count=80,
                         suppress_health_check=[HealthCheck.too_slow]),
}


def loaded() -> str | None:
    """The profile :func:`load_profile` loaded (dev, ci, thorough), or None when it was never called."""
    current = settings.get_current_profile_name()
    return current.removeprefix("peakproof-") if current.startswith("peakproof-") else None


def load_profile(environ: Mapping[str, str] = os.environ) -> str:
    """Load the profile ``HYPOTHESIS_PROFILE`` names (dev when unset) and return its name."""
    name = environ.get("HYPOTHESIS_PROFILE", "dev")
    if name not in PROFILES:
        raise pytest.UsageError(f"HYPOTHESIS_PROFILE: expected one of {', '.join(PROFILES)}; got {name!r}. "
                                "Unset it for dev.")
    settings.register_profile(f"peakproof-{name}", PROFILES[name])
    settings.load_profile(f"peakproof-{name}")
    return name
