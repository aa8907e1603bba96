"""The run record: what one process knows of the run, built once at its entry point.

Each process has one entry point (``peakproof`` on the command line, the Locust process, the
pytest session) that turns the user's request (:class:`~peakproof.spec.RunSpec`, the one thing
written between processes) into a :class:`Run`: the request, the case object it names and the
driver class every stage builds its drivers from. :func:`peakproof.cases.run_of` is where that
happens; below the entry points the case is ``run.case`` and the driver ``run.driver``: nothing
looks a case up by its name or turns a ``--driver`` string into a class again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .driver import construct, driver_class
from .errors import UsageError
from .spec import RunFacts, RunSpec

if TYPE_CHECKING:
    from .case import Case
    from .design import StatedDesign
    from .history import History
    from .http import Transport


@dataclass(frozen=True)
class Run:
    """The request, the case it names, the class its drivers are built from, and what the run has learned."""

    spec: RunSpec
    case: "Case"
    driver: type  # the user's --driver class, else the case's HTTP driver of its contract
    facts: RunFacts = field(default_factory=RunFacts)  # none for a stage run directly (locust, pytest)

    @classmethod
    def of(cls, spec: RunSpec, case: "Case", facts: RunFacts | None = None) -> "Run":
        """The run of ``spec`` over ``case`` (the case its ``spec.case`` names): the one place a
        ``--driver`` string becomes a class. A driver that cannot be loaded, or one with no URL to
        drive, is a usage error said before any stage starts."""
        if case.name != spec.case:
            raise ValueError(f"the run's spec names case {spec.case!r}, not {case.name!r}")
        if case.drivers is None:
            raise UsageError(f"case {case.name}", "a case read by the registry (peakproof.cases), which gives it "
                             "its package's drivers", None, "Build the run from peakproof.cases.run_of(spec).")
        if spec.driver and not spec.target_url:
            raise UsageError("--driver", "a --target-url to drive (the embedded reference speaks the contract)",
                             None, "Give your service's URL with --target-url.")
        drivers = case.drivers
        return cls(spec, case, driver_class(spec.driver, drivers.protocol) if spec.driver else drivers.over_http,
                   facts or RunFacts())

    def with_options(self, **changes: Any) -> "Run":
        """The same run with choices of ``spec`` settled (the case and the driver stay)."""
        return replace(self, spec=self.spec.with_options(**changes))

    def with_spec(self, spec: RunSpec) -> "Run":
        if spec.case != self.case.name or spec.driver != self.spec.driver:
            raise ValueError("a run's spec may settle its choices, not change its case or its driver")
        return replace(self, spec=spec)

    def learned(self, **facts: Any) -> "Run":
        """The same run, knowing more (:class:`~peakproof.spec.RunFacts`)."""
        return replace(self, facts=self.facts.learned(**facts))

    def rules(self) -> Any:
        """What the target states it does, which the checks judge it by (None for a case without)."""
        return self.case.rules(self.spec, self.driver) if self.case.rules else None

    def stated_rules(self) -> dict[str, Any]:
        """The rules as every verdict lists them ({} for none)."""
        rules = self.rules()
        return dict(rules.describe()) if rules is not None else {}

    def design(self) -> "StatedDesign":
        """What the user stated of the case's design (its options over the driver's ``design``)."""
        from .design import stated_design

        return stated_design(self.case.design, dict(self.spec.case_options), self.driver)

    def build_driver(self, *, history: "History | None" = None, transport: "Transport | None" = None,
                     timeout: float | None = None, **extra: Any) -> Any:
        """The run's driver for ``spec.target_url``: the one place every stage (scenario, calibration,
        probe, property, replay) builds one; the run's history, transport and timeout go to it."""
        spec = self.spec
        keywords = {"history": history, "transport": transport,
                    "timeout": spec.request_timeout if timeout is None else timeout,
                    "admin_token": spec.admin_token, "token": spec.token, **self.case.driver_options(spec), **extra}
        driver = construct(self.driver, spec.target_url or "", **keywords)
        if self.case.bind_rules is not None:
            self.case.bind_rules(driver, spec)
        return driver
