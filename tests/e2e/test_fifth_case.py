"""A built-in case is one folder: ``peakproof/cases/tickets/`` copied as a case of its own needs no edit
outside it. The copy (``fifth_case``, in a temporary folder) changes one line of its own (``NAME`` in
its ``case.py``) and is registered by the environment alone (``PEAKPROOF_CASES=fifth_case``). Through
peakproof's entry points, each a child process from the repository root:

1. the registry holds ``fifth`` beside ``tickets``, with its own scenarios, its package's drivers and
   folder, and the tickets' options shared, not doubled;
2. its properties, run by their path from its folder, pass in process against its own drivers;
3. ``peakproof run fifth`` with a short load serves its reference and runs its ``fifth-opening`` scenario
   (handed to Locust by ``loadtests/cases.py``) and says PASS (its properties: 2, not run twice).

No file outside the copy is written: the test checks the repository's shared files are as they were.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("peakproof", "loadtests", "properties", "targets", "conftest.py", "pyproject.toml")


@pytest.fixture(scope="module")
def fifth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    where = tmp_path_factory.mktemp("fifth")
    folder = where / "fifth_case"
    shutil.copytree(ROOT / "peakproof" / "cases" / "tickets", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    case = folder / "case.py"
    text = case.read_text(encoding="utf-8")
    assert text.count('NAME = "tickets"') == 1, "the case's name is one line of its case.py"
    case.write_text(text.replace('NAME = "tickets"', 'NAME = "fifth"'), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(where) + os.pathsep + str(ROOT), PYTHONDONTWRITEBYTECODE="1",
               HYPOTHESIS_PROFILE="ci", PEAKPROOF_CASES="fifth_case")
    return env


def run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def shown(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def shared_files() -> dict[str, float]:
    return {str(p): p.stat().st_mtime for name in SHARED for p in sorted((ROOT / name).rglob("*.py"))
            if "__pycache__" not in p.parts}


def test_the_registry_holds_the_copied_case_with_its_own_scenarios_and_the_options_shared(
        fifth: dict[str, str]) -> None:
    code = ("from peakproof.cases import all_cases, all_options; import loadtests.cases; "
            "from peakproof.load.scenario import SCENARIOS; c = all_cases()['fifth']; "
            "names = [o.name for o in all_options()]; "
            "print(c.package, c.scenarios, c.calibration, c.drivers.in_process.__module__, c.folder.name, "
            "len(names) == len(set(names)), sorted(k for k in SCENARIOS if k.startswith('fifth-')), "
            "c.loadtest_file().name, c.properties_file().name)")
    proc = run(["-c", code], fifth, 60)
    assert proc.returncode == 0, shown(proc)
    assert proc.stdout.split() == [
        "fifth_case", "('fifth-opening',)", "fifth-calibrate", "fifth_case.driver", "fifth_case", "True",
        "['fifth-calibrate',", "'fifth-lease-faults',", "'fifth-opening',", "'fifth-sold-out']", "cases.py",
        "properties.py"], shown(proc)


@pytest.mark.timeout(700)
def test_its_properties_pass_run_by_their_path_from_its_folder(fifth: dict[str, str]) -> None:
    folder = Path(fifth["PYTHONPATH"].split(os.pathsep)[0]) / "fifth_case"
    proc = run(["-m", "pytest", str(folder / "properties.py"), "-q", "-p", "no:cacheprovider", "-x"], fifth, 600)
    assert proc.returncode == 0, shown(proc)
    assert " passed" in proc.stdout and "fifth over HTTP" not in proc.stdout, shown(proc)


@pytest.mark.alone  # a load: its latency reads the machine (tests/conftest.py)
@pytest.mark.timeout(900)
@pytest.mark.decides
def test_peakproof_run_serves_its_reference_runs_its_scenario_and_passes(
        fifth: dict[str, str]) -> None:
    before = shared_files()
    proc = run(["-m", "peakproof", "run", "fifth", "--scale", "0.02", "--duration", "3", "--time-scale", "240",
                "--skip-properties",
                "--report-dir", str(Path(fifth["PYTHONPATH"].split(os.pathsep)[0]) / "reports")], fifth, 800)
    out = proc.stdout + proc.stderr
    if proc.returncode == 2:
        from tests.support.runs import skip_when_a_neighbour_left_it_undecided

        skip_when_a_neighbour_left_it_undecided(proc)
    assert proc.returncode == 0, shown(proc)
    assert "peakproof verdict for fifth: PASS" in out and "load scenario fifth-opening" in out, shown(proc)
    assert shared_files() == before, "the run wrote into the repository's shared files"
