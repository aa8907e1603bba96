"""The harness's own limits: a property that announced how long it takes is not cut short by
pytest-timeout, and one that is cut short is INCONCLUSIVE naming the limit, never the target's FAIL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]

PROPERTY = '''
import time
from peakproof.realtime import extend_harness_timeout

def test_a_run_that_announced_its_length(request):
    extend_harness_timeout(request.node, 6)
    time.sleep(2.5)

def test_a_run_that_did_not():
    time.sleep(2.5)
'''
def test_a_run_cut_by_the_harness_s_own_limit_is_inconclusive_and_an_announced_one_is_not_cut(tmp_path: Path) -> None:
    props = tmp_path / "properties"
    props.mkdir()
    (props / "test_limits.py").write_text(PROPERTY)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:schemathesis", "--timeout", "1.5", "-rs", "-q", str(props / "test_limits.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    out = proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in out, out[-3000:]
    assert "INCONCLUSIVE: stopped by the harness's own limit, not the target: Timeout (>1.5s)" in out, out[-3000:]
    assert proc.returncode == 6, (proc.returncode, out[-3000:])  # not decided: never 0, never FAIL's 1
