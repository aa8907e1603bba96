"""The package's layout keeps its seams: every module imports on its own, the import graph has
no cycle, no module grows past 500 lines, and the cases are listed in one place (the registry)."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import peakproof

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "peakproof"


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages([str(PKG)], "peakproof."))


def module_file(name: str) -> Path:
    path = PKG.joinpath(*name.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def module_imports(name: str, source: str | None = None, known: set[str] | None = None) -> set[str]:
    """The package's modules ``name`` imports, wherever the import stands: at module level, inside
    a function (a lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (a type is one
    too). ``from pkg import sub`` counts ``pkg.sub`` when ``sub`` is a module."""
    known = set(modules()) | {"peakproof"} if known is None else known
    is_pkg = source is None and module_file(name).name == "__init__.py"
    text = module_file(name).read_text(encoding="utf-8") if source is None else source
    package = name if is_pkg else name.rsplit(".", 1)[0]
    root = name.split(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                mod = alias.name
                while mod and mod not in known:  # import a.b.c: the deepest module of ours
                    mod = mod.rpartition(".")[0]
                if mod:
                    found.add(mod)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != root:
                continue
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known}
            found |= subs or {mod}
    # A package face importing its own submodules re-exports them: an edge like any other, so a submodule
    # that imports its face back closes a loop (package faces count).
    return {m for m in found | dynamic_imports(name, text, known) if m != name}


# Loads by a name no literal in the module spells, and where such a name can point. A new one fails
# test_every_load_by_a_computed_name_is_declared until it is declared here.
DYNAMIC_REACH = {
    "peakproof.case": ("peakproof.models.",),  # Case.model_module(): the case's ported model
    "peakproof.driver": (),  # driver_class: the user's --driver module, outside the package
}


def _is_import_module(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or \
        (isinstance(f, ast.Name) and f.id in ("import_module", "__import__"))


def dynamic_imports(name: str, source: str, known: set[str], *, strict: bool = False) -> set[str]:
    """The modules ``name`` loads through ``importlib.import_module`` (a load the static reader misses):
    a literal name; a name ending in a literal (``f"{package}.checkup"``: every module so named) or
    starting with one (``"peakproof.models." + x``: every module under it); a package walking its own
    ``__path__`` (the registry): each of its subpackages; a name from the module's own literals
    (``_PUBLIC``'s table); else what :data:`DYNAMIC_REACH` declares (``strict``: raise for an undeclared one)."""
    tree = ast.parse(source)
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    walks_own_path = "iter_modules" in source and "__path__" in source
    found: set[str] = set()
    for node in ast.walk(tree):
        if not _is_import_module(node) or not node.args:  # type: ignore[attr-defined]
            continue
        arg = node.args[0]  # type: ignore[attr-defined]
        parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg.left, arg.right] \
            if isinstance(arg, ast.BinOp) else [arg]
        head = parts[0].value if isinstance(parts[0], ast.Constant) and isinstance(parts[0].value, str) else ""
        tail = parts[-1].value if isinstance(parts[-1], ast.Constant) and isinstance(parts[-1].value, str) else ""
        if isinstance(arg, ast.Constant):
            found |= {arg.value} & known
        elif tail.startswith("."):
            found |= {m for m in known if m.endswith(tail)}
        elif head:
            found |= {m for m in known if m.startswith(head)}
        elif walks_own_path:
            found |= {m for m in known if m.startswith(name + ".") and m.count(".") == name.count(".") + 1}
        elif {lit for lit in literals if lit in known}:
            found |= {lit for lit in literals if lit in known}
        elif name in DYNAMIC_REACH:
            found |= {m for m in known for prefix in DYNAMIC_REACH[name] if m.startswith(prefix)}
        elif strict:
            raise AssertionError(f"{name}:{node.lineno} loads a module by a computed name no rule reads: "
                                 f"declare where it can point in DYNAMIC_REACH")
    return found


def top_level_imports(name: str, source: str, known: set[str]) -> set[str]:
    """What the layout test read before: module-level statements only (kept to show what it missed)."""
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return module_imports(name, ast.unparse(tree), known)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each as a loop to read:
    its modules in order, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(_loop(sorted(group), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _loop(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One loop through a strongly connected group, from its first module back to it."""
    members, start = set(group), group[0]
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, ()) & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    return group + [start]


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
