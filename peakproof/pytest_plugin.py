"""Fixtures that hand a test its target: the in-process reference, a URL, or a served reference.

Loaded by the project's ``conftest.py`` (``pytest_plugins``); the options themselves are
declared there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

from .cases.tickets import HttpTickets, InProcessTickets, TicketsDriver, load_driver
from .checks import EXERCISED
from .history import History
from .launch import ServedTarget


@dataclass
class TicketsTarget:
    """Where a tickets property runs. In-process: a fresh core per driver; URL: one server."""

    url: str | None
    policy: str = "pessimistic"
    admin_token: str | None = None
    driver_spec: str | None = None

    @property
    def in_process(self) -> bool:
        return self.url is None

    @property
    def hold_seconds(self) -> float:
        # Virtual time can use the seed's window; a URL runs in real time, so a short one.
        return 120.0 if self.in_process else 0.5

    @property
    def advance_choices(self) -> list[float]:
        h = self.hold_seconds
        return [h / 60, h / 2, h * 1.01] if self.in_process else [0.05, 0.3, 0.8]

    def new_driver(self, history: History | None = None) -> TicketsDriver:
        if self.in_process:
            return InProcessTickets(policy=self.policy, history=history)
        if self.driver_spec:
            return load_driver(self.driver_spec, base_url=self.url)
        return HttpTickets(self.url, admin_token=self.admin_token, history=history)  # type: ignore[arg-type]

    def shared(self) -> Callable[[History], TicketsDriver]:
        """A factory of drivers that all reach the *same* target (for concurrent bursts)."""
        if self.in_process:
            import time

            from targets.tickets import InMemoryStore, TicketsCore

            core = TicketsCore(InMemoryStore(), time.time, policy=self.policy)  # type: ignore[arg-type]
            return lambda history: InProcessTickets(core=core, history=history)
        return lambda history: HttpTickets(self.url, admin_token=self.admin_token, history=history)  # type: ignore[arg-type]

    def describe(self) -> str:
        return self.url or f"in-process reference target (policy {self.policy})"


@pytest.fixture(scope="session")
def tickets_target(request: pytest.FixtureRequest) -> TicketsTarget:
    opt = request.config.getoption
    return TicketsTarget(opt("--target-url"), opt("--policy"), opt("--admin-token"), opt("--driver"))


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
