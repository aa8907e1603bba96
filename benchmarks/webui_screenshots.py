"""Screenshots of peakproof in Locust's web UI, taken by headless Chromium (Debian's ``chromium``).

Starts the reference tickets target and ``locust -f loadtests/`` *without* ``--headless`` and
without ``--scenario`` (as most Locust users start it), then, in the browser (Playwright for
Python driving Debian's chromium; a tool of this script only, not of peakproof):

1. opens "Custom parameters", picks the scenario in its drop-down, sets scale and duration,
   and shoots the start form (the user-count fields are disabled: the shape drives the run);
2. presses START, waits for the verdict at ``/peakproof/verdict``, opens the "peakproof
   verdict" tab and shoots it.

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

from peakproof.cases import get_case
from peakproof.launch import ServedTarget, free_port  # noqa: E402


def browse(web: str, out: Path, scenario: str, target: str) -> dict:
    """Fill the start form and start the run as a user would (Playwright driving Debian's chromium:
    ``pip install playwright``; no browser download), shoot the form and the verdict tab."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("Debian's chromium is not installed: apt-get install chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1400, "height": 1150})
        page.goto(web + "/")
        page.get_by_text("Custom parameters").click()
        page.locator("select[name='scenario']").select_option(scenario)  # the registered scenarios
        for name, value in (("scale", "0.02"), ("duration", "4")):
            field = page.locator(f"input[name='{name}']")
            field.fill(value)
        page.wait_for_timeout(300)
        page.screenshot(path=str(out / "start-form.png"), full_page=True)
        print(f"  {out / 'start-form.png'}: the start form, {scenario} chosen")
        page.get_by_role("button", name="Start").click()
        verdict: dict = {}
        for _ in range(240):
            verdict = requests.get(f"{web}/peakproof/verdict", timeout=5).json()
            if verdict.get("outcome"):
                break
            time.sleep(0.5)
        page.wait_for_timeout(2500)  # the page polls its stats every 2 s
        page.get_by_role("tab", name="peakproof verdict").click()
        page.wait_for_timeout(500)
        page.screenshot(path=str(out / "finished-run-verdict.png"), full_page=True)
        print(f"  {out / 'finished-run-verdict.png'}: the peakproof tab, verdict {verdict.get('outcome')}")
        browser.close()
    return verdict


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="reports/webui")
    p.add_argument("--scenario", default="tickets-sold-out")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with ServedTarget(get_case("tickets")) as served, tempfile.TemporaryDirectory() as reports:
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
            verdict = browse(web, out, args.scenario, served.url)
            print(f"  verdict: {verdict.get('outcome')}; report {verdict.get('report')}")
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
