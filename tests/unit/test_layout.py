"""The package's layout keeps its seams: every module imports on its own, the import graph has
no cycle, no module grows past 500 lines, and the cases are listed in one place (the registry)."""

from __future__ import annotations

import ast

import pytest

import peakproof
from tests.support.imports import (PKG, ROOT, cycles, dynamic_imports, module_file, module_imports, modules,
                                   top_level_imports)


def test_the_package_has_no_import_loop_counting_every_import() -> None:
    graph = {m: module_imports(m) for m in modules()}
    assert cycles(graph) == [], "import loops (every import counts: module level, in functions, TYPE_CHECKING)"


# Today's loops as they stood (e5a8a3a), in small: a case's checks importing its promise module at the
# bottom, which imports the analysis type back under TYPE_CHECKING; options reaching up to the registry
# inside a function. The top-level reader saw neither.
LOOPS_AS_THEY_STOOD = {
    "pkg.checks": "from __future__ import annotations\nclass Analysis: ...\nfrom .promises import promise\n",
    "pkg.promises": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .checks import Analysis\n"
                     "def promise(a: 'Analysis') -> None: ...\n"),
    "pkg.options": "def all_options():\n    from .registry import cases\n    return cases()\n",
    "pkg.registry": "from .options import all_options\ndef cases(): ...\n",
}


def test_the_reader_sees_the_loops_the_top_level_reader_missed() -> None:
    known = set(LOOPS_AS_THEY_STOOD) | {"pkg"}
    every = {m: module_imports(m, src, known) for m, src in LOOPS_AS_THEY_STOOD.items()}
    top = {m: top_level_imports(m, src, known) for m, src in LOOPS_AS_THEY_STOOD.items()}
    assert cycles(top) == []  # what the old test passed
    assert cycles(every) == [["pkg.checks", "pkg.promises", "pkg.checks"],
                             ["pkg.options", "pkg.registry", "pkg.options"]]


def test_every_load_by_a_computed_name_is_declared() -> None:
    known = set(modules()) | {"peakproof"}
    for m in modules():
        dynamic_imports(m, module_file(m).read_text(encoding="utf-8"), known, strict=True)


def test_the_reader_counts_a_package_face_and_the_loads_importlib_makes() -> None:
    known = {"pkg", "pkg.cases", "pkg.cases.a", "pkg.cases.a.case", "pkg.cases.a.checkup", "pkg.tool"}
    face = "from .case import CASE\n"
    record = "def drivers():\n    from . import OVER_HTTP\n    return OVER_HTTP\n"
    registry = "import importlib, pkgutil\nfor m in pkgutil.iter_modules(__path__):\n" \
               "    importlib.import_module(f'{__name__}.{m.name}')\n"
    tool = "import importlib\ndef checkup(package):\n    return importlib.import_module(f'{package}.checkup')\n"
    assert module_imports("pkg.cases.a.case", record, known) == {"pkg.cases.a"}  # the face, counted
    assert cycles({"pkg.cases.a": module_imports("pkg.cases.a", face, known) | {"pkg.cases.a.case"},
                   "pkg.cases.a.case": module_imports("pkg.cases.a.case", record, known)}) == \
        [["pkg.cases.a", "pkg.cases.a.case", "pkg.cases.a"]]
    assert dynamic_imports("pkg.cases", registry, known) == {"pkg.cases.a"}
    assert dynamic_imports("pkg.tool", tool, known) == {"pkg.cases.a.checkup"}


# The layers, bottom to top: a module imports from its own layer or those below, never above. Each process's
# entry point builds the run record (peakproof.cases.run_of) and hands the case object down; the stages get
# it, never a name; the cases know nothing of the stages; the machinery knows no case.
ENTRY_POINTS = {"peakproof.cli", "peakproof.__main__", "peakproof.pytest_plugin", "peakproof.pytest_session",
                "peakproof.load.engine", "peakproof.replay_cli"}  # and each case folder's load and properties
REGISTRY = "peakproof.cases"
STAGES = {"peakproof", "peakproof.runner", "peakproof.plan", "peakproof.replay", "peakproof.shrink",
          "peakproof.drivertool", "peakproof.scaffold"}  # and peakproof.load.*, its Locust process's entry aside
LAYER_NAMES = ("machinery", "a case package", "the stages", "the registry", "an entry point")


def case_entry_file(module: str) -> bool:
    """A case folder's scenarios (``load``) and properties (``properties``, ``properties_*``): what Locust and
    pytest load, entry points of the case's own (nothing in the package imports them)."""
    last = module.rsplit(".", 1)[-1]
    return module.startswith(REGISTRY + ".") and (last == "load" or last.startswith("properties"))


def layer(module: str) -> int:
    if module in ENTRY_POINTS or case_entry_file(module):
        return 4
    if module == REGISTRY:
        return 3
    if module in STAGES or module.startswith("peakproof.load."):
        return 2
    if module.startswith(REGISTRY + "."):
        return 1
    return 0


def test_no_module_imports_one_on_a_layer_above_it() -> None:
    graph = {m: module_imports(m) for m in [*modules(), "peakproof"]}
    upward = [f"{m} ({LAYER_NAMES[layer(m)]}) imports {d} ({LAYER_NAMES[layer(d)]})"
              for m in sorted(graph) for d in sorted(graph[m]) if d in graph and layer(d) > layer(m)]
    assert upward == [], "every import counts: module level, in functions, TYPE_CHECKING, package faces, importlib"


def calls_to(source: str, names: set[str]) -> list[str]:
    """``name(...)`` or ``x.name(...)`` calls of ``names`` in ``source``, as name:line."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if called in names:
                out.append(f"{called}:{node.lineno}")
    return out


def test_below_the_entry_points_no_case_is_looked_up_by_name_and_no_driver_string_resolved() -> None:
    lookups = {m: calls_to(module_file(m).read_text(encoding="utf-8"), {"get_case", "all_cases", "run_of"})
               for m in modules() if layer(m) < layer(REGISTRY)}
    assert {m: c for m, c in lookups.items() if c} == {}
    # the driver string becomes a class at one place: the run record's (peakproof.run.Run.of)
    resolving = {m for m in modules() if calls_to(module_file(m).read_text(encoding="utf-8"), {"driver_class"})}
    assert resolving == {"peakproof.run"}


def test_the_layer_rule_sees_an_upward_import() -> None:
    known = {"peakproof.driver", "peakproof.cases", "peakproof.cases.a", "peakproof.cases.a.case"}
    lazy = "def drivers(spec):\n    from .cases import get_case\n    return get_case(spec.case)\n"
    found = module_imports("peakproof.driver", lazy, known)
    assert found == {"peakproof.cases"} and layer("peakproof.cases") > layer("peakproof.driver")
    assert calls_to(lazy, {"get_case"}) == ["get_case:3"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_no_module_of_the_package_passes_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}


def test_the_cases_are_listed_only_by_the_registry() -> None:
    from peakproof.cases import all_cases

    names = list(all_cases())
    assert names[:3] == ["tickets", "notifications", "feed"]
    literal = repr(tuple(names[:3]))  # ("tickets", "notifications", "feed") written out anywhere else
    offenders = [str(p.relative_to(ROOT)) for folder in ("peakproof", "loadtests", "properties")
                 for p in (ROOT / folder).rglob("*.py")
                 if literal in p.read_text(encoding="utf-8") or literal.replace("'", '"') in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_the_seed_s_peaks_are_computed_by_the_models_not_written_out() -> None:
    offenders = []
    # the harness's code (targets/ is the system under test: its 20,000-character body limit is no peak)
    for folder in ("peakproof", "loadtests", "properties", "benchmarks"):
        for p in (ROOT / folder).rglob("*.py"):
            if "models" in p.parts:
                continue
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#")[0]
                if any(lit in code for lit in ("20000", "20_000", "1736")):
                    offenders.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offenders == []
    assert peakproof.__name__ == "peakproof"


def test_a_unit_test_that_starts_a_process_or_opens_a_socket_fails_saying_where_it_belongs() -> None:
    import socket
    import subprocess

    from tests.unit.conftest import NotAUnitTest

    with pytest.raises(NotAUnitTest, match="tests/served/"):
        subprocess.run(["true"])
    with pytest.raises(NotAUnitTest, match="opened a connection"):
        socket.create_connection(("127.0.0.1", 9), timeout=0.1)


def test_the_public_surface_names_what_drivers_cases_and_scenarios_are_written_with() -> None:
    for name in peakproof.__all__:
        assert getattr(peakproof, name) is not None, name
    assert peakproof.ErrorMap.__module__ == "peakproof.http" and peakproof.scenario.__module__ == "peakproof.load.scenario"
    with pytest.raises(AttributeError, match="no attribute 'engine'"):
        peakproof.engine  # noqa: B018  (the engine's internals are not public)


TIERS = ("unit", "served", "e2e", "quality", "stacks")


def test_no_test_reaches_into_another_tiers_test_modules() -> None:
    # what two tiers share lives in tests/support; a test module of another tier is its tier's own (importing it
    # runs its collection-time code, and moving or deleting it breaks a test elsewhere)
    reaching = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        own = path.relative_to(ROOT / "tests").parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                parts = name.split(".")
                if len(parts) > 1 and parts[0] == "tests" and parts[1] in TIERS and parts[1] != own:
                    reaching.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not reaching, "move what they share to tests/support: " + "; ".join(reaching)
