"""Fixtures that hand a property its target (one mechanism for every case): the in-process
reference, a URL, or a served reference.

Loaded by the project's ``conftest.py`` (``pytest_plugins``); the options themselves are
declared there.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

from .checks import EXERCISED
from .driver import load_driver
from .history import History
from .launch import ServedTarget


CASE_PATHS = {"tickets": "/tickets", "notifications": "/notifications", "feed": "/feed"}


@dataclass
class Target:
    """Where one case's properties run: its in-process reference (virtual time) or a URL.

    Every property machine gets its drivers from here (:meth:`new_driver`), whatever the
    case: the same options (``--target-url``, ``--admin-token``, ``--provider-url``,
    ``--policy``, ``--driver``) mean the same thing for each.
    """

    case: str
    url: str | None = None
    policy: str | None = None  # of the in-process reference; None: the case's default
    admin_token: str | None = None
    provider_url: str | None = None
    driver_spec: str | None = None  # module:Class of the user's own driver (built with base_url=url)
    delivery_rules: Any = None  # notifications: the target's DeliveryRules (budget, breaker, answer timeout)
    in_process_options: dict[str, Any] = field(default_factory=dict)  # e.g. core_factory: a broken core

    @property
    def in_process(self) -> bool:
        return self.url is None

    def new_driver(self, history: History | None = None, **in_process_options: Any) -> Any:
        """A fresh driver: in process, a new reference core (``in_process_options`` go to it);
        over a URL, a driver of that URL recording into ``history``."""
        module = importlib.import_module(f"peakproof.cases.{self.case}")
        if self.in_process:
            options = {**self.in_process_options, **in_process_options}
            if self.policy:
                options.setdefault("policy", self.policy)
            return module.IN_PROCESS(history=history, **options)
        if self.driver_spec:
            return load_driver(self.driver_spec, module.PROTOCOL, base_url=self.url)
        extra = {"provider_url": self.provider_url} if self.provider_url else {}
        return module.OVER_HTTP(self.url, admin_token=self.admin_token, history=history, **extra)

    def describe(self) -> str:
        return self.url or f"in-process reference target{f' (policy {self.policy})' if self.policy else ''}"


def target_from_options(case: str, config: pytest.Config) -> Target:
    """The case's :class:`Target` from the command line; skips when the URL serves another case."""
    opt = config.getoption
    url = opt("--target-url")
    if url:
        path = urlsplit(url).path.rstrip("/")
        other = [c for c, p in CASE_PATHS.items() if c != case and path.endswith(p)]
        if other:
            pytest.skip(f"--target-url {url} serves the {other[0]} case; {case} needs a URL ending in "
                        f"{CASE_PATHS[case]} (or one with no case path)")
    policy = opt("--policy") if case == "tickets" else None
    rules = None
    if case == "notifications":
        from .cases.notifications import DeliveryRules

        try:
            rules = DeliveryRules.from_options(lambda name: getattr(config.option, name, None))
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
    return Target(case, url, policy, opt("--admin-token"), opt("--provider-url"),
                  opt("--driver") if case == "tickets" else None, delivery_rules=rules)


@pytest.fixture(scope="session")
def tickets_target(request: pytest.FixtureRequest) -> Target:
    return target_from_options("tickets", request.config)


@pytest.fixture(scope="session")
def notifications_target(request: pytest.FixtureRequest) -> Target:
    return target_from_options("notifications", request.config)


@pytest.fixture(scope="session")
def feed_target(request: pytest.FixtureRequest) -> Target:
    return target_from_options("feed", request.config)


@pytest.fixture
def in_process_only(request: pytest.FixtureRequest) -> None:
    """For properties that decide what the target cannot be told over HTTP (provider answers,
    interleavings, partial fan-out): skipped with ``--target-url``, where their URL twins run."""
    if request.config.getoption("--target-url"):
        pytest.skip("an in-process property (it controls the target's insides); with --target-url its "
                    "over-HTTP counterpart runs instead")


@pytest.fixture(scope="session")
def tickets_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL that serves the tickets contract: --target-url, or the reference server started here."""
    url = request.config.getoption("--target-url")
    if url:
        yield url
        return
    with ServedTarget("tickets", policy=request.config.getoption("--policy")) as served:
        yield served.url


@pytest.fixture
def serve_tickets() -> Iterator[Callable[..., ServedTarget]]:
    """Start reference servers with chosen options; all are stopped after the test."""
    started: list[ServedTarget] = []

    def start(**options: Any) -> ServedTarget:
        t = ServedTarget("tickets", **options).start()
        started.append(t)
        return t

    yield start
    for t in started:
        t.__exit__(None, None, None)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """How many chances to fail each check had over the run; write them where ``peakproof run`` reads them."""
    if not EXERCISED:
        return
    tr = terminalreporter
    tr.section("peakproof: chances to fail, per check (the most one judgement had)")
    for name, n in sorted(EXERCISED.items()):
        tr.write_line(f"  {name}: {n:,}" + ("   <- not exercised: this run could not have caught its bug" if not n
                                           else ""))
    out = os.environ.get("PEAKPROOF_PROPERTIES_SUMMARY")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({"exitstatus": int(exitstatus), "chances": EXERCISED}, fh, indent=1)
