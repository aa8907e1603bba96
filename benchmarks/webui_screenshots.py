"""Screenshots of peakproof in Locust's web UI, taken by headless Chromium (Debian's ``chromium``).

Starts the reference tickets target and ``locust -f loadtests/`` *without* ``--headless`` and
without ``--scenario`` (as most Locust users start it), then:

1. shoots the start form (the scenario drop-down, scale, time scale; no user-count fields);
2. starts a run the way the form does (``POST /swarm`` with the form's fields), waits for the
   verdict at ``/peakproof/verdict``, and shoots the peakproof tab with it.

    python benchmarks/webui_screenshots.py [--out reports/webui] [--scenario tickets-sold-out]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peakproof.launch import ServedTarget, free_port  # noqa: E402


def shoot(url: str, out: Path, size: str = "1400,1000") -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("Debian's chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", f"--window-size={size}", "--hide-scrollbars",
                        "--virtual-time-budget=8000", f"--screenshot={out}", url],
                       check=True, capture_output=True, timeout=120)
    print(f"  {out} ({out.stat().st_size:,} bytes) <- {url}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="reports/webui")
    p.add_argument("--scenario", default="tickets-sold-out")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with ServedTarget("tickets") as served, tempfile.TemporaryDirectory() as reports:
        port = free_port()
        locust = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--host", served.url,
                                   "--web-host", "127.0.0.1", "--web-port", str(port), "--report-dir", reports,
                                   "--loglevel", "WARNING"], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        web = f"http://127.0.0.1:{port}"
        try:
            for _ in range(100):
                try:
                    requests.get(web, timeout=1)
                    break
                except requests.ConnectionError:
                    time.sleep(0.1)
            shoot(web + "/", out / "start-form.png")
            form = {"scenario": args.scenario, "scale": "0.02", "time_scale": "1", "duration": "4",
                    "host": served.url}
            started = requests.post(f"{web}/swarm", data=form, timeout=10).json()
            print(f"  POST /swarm {form}: {started}")
            verdict: dict = {}
            for _ in range(240):
                verdict = requests.get(f"{web}/peakproof/verdict", timeout=5).json()
                if verdict.get("outcome"):
                    break
                time.sleep(0.5)
            print(f"  verdict: {verdict.get('outcome')}; report {verdict.get('report')}")
            shoot(web + "/?tab=peakproof", out / "finished-run-verdict.png", "1400,1200")
            report = requests.get(f"{web}/peakproof/report", timeout=10)
            print(f"  GET /peakproof/report: HTTP {report.status_code}, {len(report.content):,} bytes")
        finally:
            locust.terminate()
            try:
                locust.wait(15)
            except subprocess.TimeoutExpired:
                locust.kill()


if __name__ == "__main__":
    main()
