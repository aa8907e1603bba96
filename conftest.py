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


def pytest_configure(config: pytest.Config) -> None:
    """``pytest -n 3`` (the harness's suite) spreads tests one by one, except a group (``xdist_group``): tests
    that share a module fixture (the served mutants' side-by-side URL runs), and the tests that need the machine
    alone (tests/conftest.py), each stay on one worker. Set here, before xdist starts its workers, which take
    the controller's options."""
    if hasattr(config, "workerinput"):  # a worker: it parses the bare command line, so it is told here to
        config.option.loadgroup = True  # tag each grouped test's id with its group, as --dist loadgroup does
    elif getattr(config.option, "dist", "no") == "load":  # -n without a --dist of the user's own
        config.option.dist = "loadgroup"
