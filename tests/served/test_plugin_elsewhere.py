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
                          env={**{k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}, **env})


def test_someone_else_s_tests_keep_hypothesis_s_settings_and_get_no_peakproof_header(tmp_path: Path) -> None:
    (tmp_path / "test_theirs.py").write_text(
        "from hypothesis import given, settings, strategies as st\n"
        "@given(st.integers())\n"
        "def test_theirs(x):\n"
        "    assert settings().max_examples == settings.get_profile('default').max_examples\n"
        "    assert settings().deadline is not None\n")
    proc = pytest_in(tmp_path, HYPOTHESIS_PROFILE="ci")  # our ci profile has no deadline: it must not apply
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout and "peakproof:" not in proc.stdout, proc.stdout[-2000:]
    assert "peakproof-0" in proc.stdout  # the plugin was loaded (pytest lists it), and did nothing here


def test_the_shipped_properties_run_by_pyargs_from_any_folder_under_the_profile_asked_for(tmp_path: Path) -> None:
    proc = pytest_in(tmp_path, "--pyargs", "peakproof.properties.test_tickets", "--collect-only", "-q",
                     HYPOTHESIS_PROFILE="ci")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_tickets_keep_every_invariant_through_any_sequence_of_operations" in proc.stdout
    verbose = pytest_in(tmp_path, "--pyargs", "peakproof.properties.test_feed", "--collect-only",
                        HYPOTHESIS_PROFILE="ci")
    assert "peakproof: target in-process reference target" in verbose.stdout and "profile ci" in verbose.stdout, \
        verbose.stdout[-2000:]
