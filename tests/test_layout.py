"""The package's layout keeps its seams: every module imports on its own, the import graph has
no cycle, no module grows past 500 lines, and the cases are listed in one place (the registry)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import peakproof

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "peakproof"


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages([str(PKG)], "peakproof."))


def module_imports(name: str) -> set[str]:
    """The peakproof modules ``name`` imports at module level (where a cycle would bite)."""
    path = PKG.joinpath(*name.split(".")[1:])
    is_pkg = path.is_dir()
    path = path / "__init__.py" if is_pkg else path.with_suffix(".py")
    package = name if is_pkg else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("peakproof")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("peakproof"):
                known = set(modules()) | {"peakproof"}
                subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known}
                found |= subs or {mod}
    return {m for m in found if m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    out: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                out.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return out


def test_the_module_import_graph_has_no_cycle() -> None:
    graph = {m: module_imports(m) for m in modules()}
    # a package importing its own submodules is how a package re-exports; a cycle is anything else
    graph = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


@pytest.mark.slow
def test_every_module_imports_on_its_own() -> None:
    # one child; before each module, every peakproof, loadtests and targets module is forgotten, so each
    # is imported first, as a user's first import would (a cycle breaks exactly there)
    code = ("import locust  # noqa: F401  (gevent patches first, as in every Locust process)\n"
            "import importlib, sys, traceback\n"
            "bad = []\n"
            "for name in sys.argv[1:]:\n"
            "    for m in [m for m in sys.modules if m.split('.')[0] in ('peakproof', 'loadtests', 'targets')]:\n"
            "        del sys.modules[m]\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as e:\n"
            "        bad.append(f'{name}: {type(e).__name__}: {e}')\n"
            "print('\\n'.join(bad))\n")
    runnable = [m for m in modules() if not m.endswith("__main__")]  # __main__ runs the command line
    proc = subprocess.run([sys.executable, "-c", code, *runnable], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_import_check_catches_a_module_that_cannot_import_on_its_own(tmp_path: Path) -> None:
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc.b import B\nA = 1\n")
    (pkg / "b.py").write_text("from cyc.a import A\nB = 2\n")
    graph = {"cyc.a": {"cyc.b"}, "cyc.b": {"cyc.a"}}
    assert cycles(graph) == [["cyc.a", "cyc.b", "cyc.a"]]
    proc = subprocess.run([sys.executable, "-c", "import cyc.a"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode != 0 and "ImportError" in proc.stderr  # what the check above would report


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
