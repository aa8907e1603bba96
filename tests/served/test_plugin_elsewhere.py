"""The pytest plugin, installed by entry point, in a repository that is not peakproof's: it leaves
someone else's tests as they were (no header, Hypothesis's own settings) and runs peakproof's
properties by ``--pyargs`` from there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest



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


SELENIUM_LIKE = ("def pytest_addoption(parser):\n"
                 "    parser.getgroup('selenium').addoption('--driver', choices=['firefox', 'chrome'])\n")
@pytest.mark.parametrize("order", ["before peakproof", "after peakproof"])
def test_a_plugin_that_owns_driver_leaves_peakproof_s_driver_as_peakproof_driver(tmp_path: Path, order: str) -> None:
    # pytest-selenium adds --driver (its webdriver). Loaded before the plugin (-p): --driver is taken;
    # after it (here a conftest, with a pytest_selenium module installed): the plugin must not have taken it
    args: tuple[str, ...] = ()
    if order == "before peakproof":
        (tmp_path / "selenium_like.py").write_text(SELENIUM_LIKE)
        args = ("-p", "selenium_like")
    else:
        (tmp_path / "conftest.py").write_text(SELENIUM_LIKE)
        (tmp_path / "pytest_selenium.py").write_text("")
    proc = pytest_in(tmp_path, *args, "--pyargs", "peakproof.properties.test_tickets", "-k", "any_sequence",
                     "--driver", "firefox", "--peakproof-driver", "not_a_driver_file.py:Shop",
                     "--target-url", "http://127.0.0.1:9/tickets", PYTHONPATH=str(tmp_path))
    out = proc.stdout + proc.stderr
    assert "already added" not in out, out[-2000:]
    # the driver peakproof was given is the one it tried to load, and the webdriver's value never reached it
    assert "not_a_driver_file.py" in out and "firefox" not in out.replace("--driver firefox", ""), out[-2000:]
