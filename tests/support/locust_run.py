"""Run ``locust -f ...`` as a user would, and read what the run concluded from its ``--result``
(never by globbing the report directory): the stage result, and the report it names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_locust(host: str, scenario: str, report_dir: Path, *extra: str, locustfile: Path | None = None,
               timeout: float = 180, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """(Locust's exit code, the run's report as JSON with its ``result`` beside, the output)."""
    result = Path(report_dir) / f"{scenario}-result.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile or ROOT / "loadtests"), "--headless", "--host", host,
           "--scenario", scenario, "--report-dir", str(report_dir), "--result", str(result), "--only-summary",
           "--loglevel", "WARNING", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    out = proc.stdout + proc.stderr
    assert result.exists(), f"no result; locust exited {proc.returncode}:\n{out[-4000:]}"
    stage = json.loads(result.read_text())
    doc = json.loads(Path(stage["report"]).with_suffix(".json").read_text()) if stage.get("report") else {}
    doc["result"] = stage
    return proc.returncode, doc, out


def check(doc: dict[str, Any], group: str, name: str) -> dict[str, Any]:
    return next(r for r in doc[group] if r["name"] == name)
