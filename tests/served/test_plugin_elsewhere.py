"""The pytest plugin, installed by entry point, in a repository that is not peakproof's: it leaves
someone else's tests as they were (no header, Hypothesis's own settings) and runs peakproof's
properties by ``--pyargs`` from there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # child pytests


def pytest_in(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=folder,
                          capture_output=True, text=True, timeout=120,
                          env={**{k: v for k, v in os.environ.items() if k not in ("HYPOTHESIS_PROFILE", "CI")}, **env})


THEIRS = (
    "import os\n"
    "from hypothesis import given, settings, strategies as st\n"
    "@given(st.integers())\n"
    "def test_theirs(x):\n"
    "    with open(os.environ['SETTINGS_SEEN'], 'w') as f:\n"
    "        f.write(repr(settings()) + ' profile=' + settings._current_profile)\n")


@pytest.mark.parametrize("ci", ["", "true"], ids=["on a workstation", "under CI=true"])
def test_someone_else_s_tests_keep_hypothesis_s_settings_and_get_no_peakproof_header(tmp_path: Path, ci: str) -> None:
    # Hypothesis chooses its own profile (its built-in "ci" one when it sees a CI), so "Hypothesis's own
    # settings" are what the same test sees with peakproof's plugin switched off; HYPOTHESIS_PROFILE=ci,
    # which names a peakproof profile in peakproof's sessions, must change nothing here
    (tmp_path / "test_theirs.py").write_text(THEIRS)
    seen = {}
    for plugin, args in (("off", ("-p", "no:peakproof")), ("on", ())):
        out = tmp_path / f"seen-{plugin}.txt"
        proc = pytest_in(tmp_path, *args, HYPOTHESIS_PROFILE="ci", CI=ci, SETTINGS_SEEN=str(out))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        seen[plugin] = (out.read_text(), proc.stdout)
    assert seen["on"][0] == seen["off"][0]
    assert "profile=peakproof" not in seen["on"][0]
    stdout = seen["on"][1]
    assert "1 passed" in stdout and "peakproof:" not in stdout, stdout[-2000:]
    assert "peakproof-0" in stdout  # the plugin was loaded (pytest lists it), and did nothing here


def test_the_shipped_properties_run_by_pyargs_from_any_folder_under_the_profile_asked_for(tmp_path: Path) -> None:
    proc = pytest_in(tmp_path, "--pyargs", "peakproof.properties.test_tickets", "--collect-only", "-q",
                     HYPOTHESIS_PROFILE="ci")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_tickets_keep_every_invariant_through_any_sequence_of_operations" in proc.stdout
    verbose = pytest_in(tmp_path, "--pyargs", "peakproof.properties.test_feed", "--collect-only",
                        HYPOTHESIS_PROFILE="ci")
    assert "peakproof: target in-process reference target" in verbose.stdout and "profile ci" in verbose.stdout, \
        verbose.stdout[-2000:]
