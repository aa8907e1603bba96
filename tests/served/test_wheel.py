"""The wheel a team installs (built here from the checkout, as ``pip install .`` builds it) carries
everything a run needs under the ``peakproof`` namespace, and nothing at the top of site-packages but
``peakproof`` itself. The end-to-end proof (a fresh venv, the wheel alone, runs from an empty folder)
is tests/support/install_check.sh (docs/install.md), run by hand at each release."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
def test_the_wheel_ships_targets_scenarios_properties_and_the_plugin_under_peakproof(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("peakproof-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"peakproof", wheel.name.split("-py3")[0] + ".dist-info"}
    for case in ("tickets", "notifications", "feed"):
        for shipped in (f"peakproof/loadtests/{case}.py", f"peakproof/properties/test_{case}.py",
                        f"peakproof/targets/{case}/openapi.json", f"peakproof/targets/{case}/core.py"):
            assert shipped in names, shipped
    assert "peakproof/properties/conftest.py" in names  # the Hypothesis profiles, wherever the properties run
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "[pytest11]\npeakproof = peakproof.pytest_plugin" in entry_points
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "Project-URL: Changelog" in metadata and "Classifier: Framework :: Pytest" in metadata
