"""Project-wide pytest setup: Hypothesis profiles and the options that pick a target.

``HYPOTHESIS_PROFILE`` selects dev (default), ci (derandomized, no example database,
reproduction blobs printed) or thorough. The options (``--target-url URL`` and the rest)
are peakproof's own, declared once in :mod:`peakproof.options` and added by the plugin.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None, stateful_step_count=30)
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, database=None,
                          print_blob=True, stateful_step_count=30,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=1_000, deadline=None, stateful_step_count=80,
                          suppress_health_check=[HealthCheck.too_slow])

_profile = os.environ.get("HYPOTHESIS_PROFILE", "dev")
if _profile not in ("dev", "ci", "thorough"):
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE: expected dev, ci or thorough; got {_profile!r}. "
                            "Unset it for dev.")
settings.load_profile(_profile)


pytest_plugins = ["peakproof.pytest_plugin"]

