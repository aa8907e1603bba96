"""One shape per role: every case has the same modules, with the same roles, on the same bases
(ARCHITECTURE.md, "One shape per case"). A new case, or a drifting one, fails here."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from peakproof.cases import all_cases
from peakproof.driver import HttpDriver, InProcessDriver
from peakproof.targets._asgi import AsgiApp
from peakproof.targets._background import BackgroundLoop

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = tuple(name for name, case in all_cases().items() if case.package == f"peakproof.cases.{name}")
APPS = {"tickets": "TicketsApp", "notifications": "NotificationsApp", "feed": "FeedApp"}
LOOPS = {"tickets": "Supervisor", "notifications": "Dispatcher", "feed": "FanoutConsumers"}


@pytest.mark.parametrize("case", BUILT_IN)
def test_every_case_has_the_same_files(case: str) -> None:
    for path in (f"peakproof/cases/{case}/case.py", f"peakproof/cases/{case}/driver.py", f"peakproof/cases/{case}/workload.py",
                 f"peakproof/cases/{case}/checks.py", f"targets/{case}/core.py", f"targets/{case}/store.py",
                 f"targets/{case}/app.py", f"targets/{case}/server.py", f"targets/{case}/openapi.json",
                 f"properties/test_{case}.py", f"loadtests/{case}.py", f"peakproof/models/{case}.py",
                 f"tests/quality/test_{case}_quality.py"):
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("case", BUILT_IN)
def test_every_case_drives_its_target_through_the_shared_driver_bases(case: str) -> None:
    pkg = importlib.import_module(f"peakproof.cases.{case}")
    assert issubclass(pkg.IN_PROCESS, InProcessDriver) and issubclass(pkg.OVER_HTTP, HttpDriver)
    assert isinstance(pkg.IN_PROCESS(), pkg.PROTOCOL)  # a runtime-checkable typing.Protocol
    http = pkg.OVER_HTTP("http://127.0.0.1:9/" + case)
    assert isinstance(http, pkg.PROTOCOL)
    for cls in (pkg.IN_PROCESS, pkg.OVER_HTTP):  # one _do, one _call: none of their own
        assert "_do" not in vars(cls) and "_call" not in vars(cls), cls


@pytest.mark.parametrize("case", BUILT_IN)
def test_every_case_judges_with_pure_functions_of_one_analysis_each_stating_its_promise(case: str) -> None:
    checks = importlib.import_module(f"peakproof.cases.{case}.checks")
    analysis = {"tickets": checks.__dict__.get("TicketsAnalysis"), "notifications":
                checks.__dict__.get("NotificationsAnalysis"), "feed": checks.__dict__.get("FeedAnalysis")}[case]
    registry = getattr(checks, f"{case.upper()}_CHECKS")
    assert registry and analysis is not None
    for fn in registry:
        params = list(inspect.signature(fn).parameters.values())
        assert params[0].annotation in (analysis.__name__, analysis), fn.__name__
        assert all(p.default is not inspect.Parameter.empty for p in params[1:]), fn.__name__
        assert (fn.__doc__ or "").strip(), f"{fn.__name__} has no docstring stating its promise"
    assert callable(getattr(checks, f"check_{case}"))


@pytest.mark.parametrize("case", BUILT_IN)
def test_every_reference_target_stands_on_the_shared_asgi_base_and_loop(case: str) -> None:
    app = importlib.import_module(f"peakproof.targets.{case}.app")
    assert issubclass(getattr(app, APPS[case]), AsgiApp)
    assert issubclass(getattr(app, LOOPS[case]), BackgroundLoop)
    for name, fn in vars(getattr(app, APPS[case])).items():  # handlers: (self, req, *path groups)
        if name.startswith("_") and not name.startswith("__") and inspect.iscoroutinefunction(fn):
            assert list(inspect.signature(fn).parameters)[:2] == ["self", "req"], name


@pytest.mark.parametrize("case", BUILT_IN)
def test_every_case_has_its_property_fixture_and_its_workload_describes_itself(case: str) -> None:
    import peakproof.pytest_plugin as plugin

    assert callable(getattr(plugin, f"{case}_target"))
    registered = all_cases()[case]
    assert registered.peak_rate() > 0 and registered.scenarios and registered.policies
    workload = importlib.import_module(f"peakproof.cases.{case}.workload")
    classes = [c for _, c in inspect.getmembers(workload, inspect.isclass) if c.__module__ == workload.__name__]
    assert classes and all(callable(getattr(c, "describe", None)) for c in classes)


def test_a_check_group_is_named_where_its_checks_register_and_read_in_their_order() -> None:
    from peakproof.checks import CheckRegistry

    reg: CheckRegistry[object] = CheckRegistry("toy")

    @reg.register(groups=("opening", "sold_out"))
    def never_oversold(a: object) -> None: ...

    @reg.register
    def idempotent(a: object) -> None: ...

    @reg.register(groups=("opening",))
    def nobody_refused(a: object) -> None: ...

    assert reg.names() == ["never_oversold", "idempotent", "nobody_refused"]
    assert reg.group("opening") == ("never_oversold", "nobody_refused") and reg.group("sold_out") == ("never_oversold",)
    with pytest.raises(KeyError, match="toy has no check group 'closing'; its groups: opening, sold_out"):
        reg.group("closing")
