"""Project-wide pytest setup: Hypothesis profiles and the options that pick a target.

``HYPOTHESIS_PROFILE`` selects dev (default), ci (derandomized, no example database,
reproduction blobs printed) or thorough. ``--target-url URL`` points the properties at a
running server instead of the in-process reference target.
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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("peakproof")
    group.addoption("--target-url", default=os.environ.get("PEAKPROOF_TARGET_URL"),
                    help="run the properties against this base URL (e.g. http://127.0.0.1:8000/tickets) "
                         "instead of the in-process reference target (env PEAKPROOF_TARGET_URL)")
    group.addoption("--admin-token", default=os.environ.get("PEAKPROOF_ADMIN_TOKEN"),
                    help="bearer token for the target's admin calls (env PEAKPROOF_ADMIN_TOKEN)")
    group.addoption("--policy", default="pessimistic", choices=["pessimistic", "optimistic", "none"],
                    help="locking policy of the in-process reference target (ignored with --target-url)")
    group.addoption("--provider-url", default=os.environ.get("PEAKPROOF_PROVIDER_URL"),
                    help="notifications: the providers' base URL whose GET /calls is the ground truth")
    from peakproof.cases.notifications import DeliveryRules

    for flag, name, kind, text in DeliveryRules.OPTIONS:  # what the target says it does; the checks judge by it
        env = "PEAKPROOF_" + flag[2:].upper().replace("-", "_")
        group.addoption(flag, dest=name, type=kind, default=kind(os.environ[env]) if os.environ.get(env) else None,
                        help=f"notifications: {text} (env {env})")
    group.addoption("--driver", default=None,
                    help="module:Class of your own tickets driver, built with base_url=--target-url")


def pytest_report_header(config: pytest.Config) -> str:
    url = config.getoption("--target-url")
    where = url or f"in-process reference target (policy {config.getoption('--policy')})"
    return f"peakproof: target {where}; hypothesis profile {_profile}"


pytest_plugins = ["peakproof.pytest_plugin"]
