"""Every module of the package imports on its own, in a fresh interpreter (as a user's first import
would): a loop that the import test (tests/unit/test_layout.py) reads can only break there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.imports import ROOT, cycles, modules


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
