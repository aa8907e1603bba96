"""The shape of a case: :class:`Case`, the one record every entry point reads.

Each case package (``peakproof/cases/<name>/``, or any package named in ``PEAKPROOF_CASES``
or under the ``peakproof.cases`` entry point group) declares its ``CASE``; the registry
(:func:`peakproof.cases.all_cases`) is built from the packages, and ``peakproof
run``/``serve``/``plan``/``models``, the pytest fixtures, the launcher and the Locust side
read it. A fourth case adds its own folders and edits no shared file.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from .errors import UsageError
from .spec import RunSpec

if TYPE_CHECKING:
    from .capabilities import Capability
    from .design import Statement
    from .options import Option


def shipped_file(what: str, name: str) -> Path:
    """``name`` of ``loadtests/`` or ``properties/``: the current folder's copy when it has one (a
    checkout, or a team's own edited scenarios), else the one the package ships (``peakproof.<what>``:
    the wheel maps the repository's top-level folders there)."""
    local = Path.cwd() / what / name
    if local.is_file():
        return local
    spec = importlib.util.find_spec(f"peakproof.{what}")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(root) / name).is_file():
            return Path(root) / name
    raise UsageError(what, f"{what}/{name} in the current directory or in the installed package (peakproof.{what})",
                     f"neither ({Path.cwd()})", "Reinstall peakproof (pip install peakproof): its wheel carries "
                                                "the scenarios and the properties.")


class CaseDrivers(NamedTuple):
    """A case package's drivers, as its face names them: ``PROTOCOL``, ``IN_PROCESS``, ``OVER_HTTP``."""
    protocol: type
    in_process: type
    over_http: type


@dataclass(frozen=True)
class Case:
    name: str
    path: str  # where the reference target serves the case's API, e.g. "/tickets"
    title: str
    package: str  # the case package: its PROTOCOL, IN_PROCESS and OVER_HTTP drivers
    policies: tuple[str, ...]  # the first is the seed's choice (the default)
    scenarios: tuple[str, ...]  # the peak
    faults: tuple[str, ...] = ()  # run with --faults
    calibration: str = ""  # the scenario that measures what this machine offers ("" for none)
    peak_rate: Callable[[], float] = lambda: 0.0  # the seed's full peak, arrivals/s: from the ported model
    default_scale: float = 0.1  # used when no calibration can run
    max_auto_scale: float = 1.0
    default_time_scale: float = 24.0
    default_duration: float | None = None  # s of constant-rate arrivals; None: the scenario's own
    # A share of the calibrated capacity the load may use. The calibration probes the case's
    # cheapest request for half a second a step; the scenario mixes heavier ones for longer.
    headroom: float = 0.5
    # checks that judge a time (latency promises besides the SLOs): not decided when the target shared
    # its cores with the harness's generators (peakproof.placement)
    latency_checks: tuple[str, ...] = ()
    needs_providers: bool = False
    fresh_target_per_scenario: bool = False  # a load run leaves a big state behind (the feed's graph)
    scenario_scale: dict[str, float] = field(default_factory=dict)  # a fault's scale as a share of --scale
    scale_axis: str = "scale"  # what --scale auto adjusts: "scale" (rate and size) or "time_scale" (feed)
    options: tuple["Option", ...] = ()  # the case's own options, on whichever surfaces they name
    # the case's defaults that depend on other options (the notifications' rounds shrink with the time scale)
    resolve: Callable[["RunSpec"], "RunSpec"] | None = None
    # what a target states it does (the notifications' delivery rules, the tickets' release lag), which its
    # checks judge by: an object with describe() -> {rule: value}, listed in every verdict; given the run's
    # spec and its driver class (a driver may state rules of its own: the tickets' tolerance)
    rules: Callable[["RunSpec", type], Any] | None = None
    # gives a built driver the rules the user stated (the tickets' driver.tolerance): build_driver calls it
    bind_rules: Callable[[Any, "RunSpec"], None] | None = None
    # ``peakproof serve`` flags (as keyword options of ServedTarget) of the embedded reference for a run
    served_options: Callable[["RunSpec"], dict[str, object]] = lambda spec: {}
    # ``peakproof plan``: the reference as light as it goes (ServedTarget keyword options)
    light_options: Callable[[], dict[str, object]] = lambda: {}
    # a stage that needs no server (the reference target only): (name, results, detail)
    in_process_stage: Callable[["RunSpec"], tuple[str, list[Any], str]] | None = None
    # ``peakproof serve CASE``: serve the reference target until interrupted (args, db, policy)
    serve: Callable[[argparse.Namespace, Path, str], None] = lambda args, db, policy: None
    model: str | None = None  # the ported model's module (compute, render) ...
    model_params: str = ""  # ... and its Params class
    loadtest: str | None = None  # the scenarios' locustfile; default: loadtests/<name>.py of the checkout
    properties: str | None = None  # the Hypothesis properties; default: properties/test_<name>.py
    rank: int = 100  # the registry's order (the first is peakproof run's default case)
    # what a driver may offer beyond the protocol's operations (peakproof.capabilities)
    capabilities: tuple["Capability", ...] = ()
    # where a product may differ from the seed's design by choice (peakproof.design): each an option of the case
    # and a key of a driver's ``design``; the checks it makes meaningless are left out by name
    design: tuple["Statement", ...] = ()
    # the contract stage in process: (the reference's ASGI app, the admin headers it takes, a stop) in a directory
    contract_app: Callable[[Path], tuple[Any, dict[str, str], Callable[[], None]]] | None = None
    # the case's own keywords for a driver's constructor (the notifications' provider_url)
    driver_options: Callable[["RunSpec"], dict[str, Any]] = lambda spec: {}
    # its package's drivers: set by the registry as it reads the package (a case's record never imports its
    # own package back: the package imports it)
    drivers: CaseDrivers | None = None
    folder: Path | None = None  # its package's folder: set by the registry as it reads the package

    def capability(self, name: str) -> "Capability":
        return next(c for c in self.capabilities if c.name == name)

    @property
    def default_policy(self) -> str:
        return self.policies[0]

    def all_scenarios(self, faults: bool) -> tuple[str, ...]:
        return self.scenarios + (self.faults if faults else ())

    def loadtest_file(self) -> Path:
        """Its scenarios' locustfile: its own (``loadtest``), else ``loadtests/<name>.py`` (the current folder's
        or the package's), else the hand-over to every case folder's ``load.py`` (``loadtests/cases.py``)."""
        if self.loadtest:
            return Path(self.loadtest)
        try:
            return shipped_file("loadtests", f"{self.name}.py")
        except UsageError:
            if self.folder is None or not (self.folder / "load.py").is_file():
                raise
            return shipped_file("loadtests", "cases.py")

    def properties_file(self) -> Path:
        """Its properties: its own (``properties``), else ``properties/test_<name>.py`` (the current folder's or
        the package's), else its folder's ``properties.py``."""
        if self.properties:
            return Path(self.properties)
        try:
            return shipped_file("properties", f"test_{self.name}.py")
        except UsageError:
            if self.folder is None or not (self.folder / "properties.py").is_file():
                raise
            return self.folder / "properties.py"

    def contract_file(self) -> Path | None:
        """The case's OpenAPI contract (the reference's own), or None for a case without one."""
        try:
            package = importlib.import_module(f"peakproof.targets.{self.name}")
        except ImportError:
            return None
        path = Path(package.__file__ or "").with_name("openapi.json")
        return path if path.exists() else None

    def model_module(self) -> Any:
        return importlib.import_module(self.model) if self.model else None

    # -- a run of this case ---------------------------------------------------------------------------------------

    def spec_from(self, get: Callable[[str], Any], **overrides: Any) -> RunSpec:
        """A run spec from parsed options: ``get(name)`` gives an option's value (None when absent there)."""
        names = {f.name for f in fields(RunSpec)} - {"case", "case_options"}
        values: dict[str, Any] = {}
        for name in names:
            v = get(name)
            if v is not None:
                values[name] = tuple(v) if name in ("slo", "without", "target_process") else v
        own = {o.name: get(o.name) for o in self.options}
        spec = RunSpec(case=self.name, case_options={k: v for k, v in own.items() if v is not None}, **values)
        return replace(spec, **overrides) if overrides else spec

    def resolved(self, spec: RunSpec, *, calibrates: bool = False) -> RunSpec:
        """``spec`` with this case's defaults filled in, once: the time scale and duration, the case's own
        rules. ``calibrates``: ``scale``/``time_scale`` "auto" stay for the calibration to fit (peakproof run);
        elsewhere "auto" scale means the case's default scale."""
        time_scale = spec.time_scale
        if time_scale is None:
            time_scale = "auto" if calibrates and self.scale_axis == "time_scale" else self.default_time_scale
        if time_scale == "auto" and self.scale_axis != "time_scale":
            raise UsageError("--time-scale", "a number for this case (only a case whose rates grow with its time "
                             "scale fits it to the machine)", "auto",
                             f"Use --scale auto; {self.name}'s default time scale is {self.default_time_scale:g}.")
        if time_scale == "auto" and not calibrates:
            time_scale = self.default_time_scale
        scale = spec.scale
        if scale == "auto" and (not calibrates or self.scale_axis == "time_scale"):
            scale = self.default_scale
        duration = spec.duration if spec.duration is not None else self.default_duration
        from .capabilities import validate_waivers

        without = validate_waivers(self.name, self.capabilities, spec.without)
        spec = replace(spec, time_scale=time_scale, scale=scale, duration=duration, without=without)
        return self.resolve(spec) if self.resolve else spec
