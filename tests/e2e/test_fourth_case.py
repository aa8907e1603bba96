"""A fourth case needs no edit outside its own files: the throwaway ``counter`` case.

It lives entirely in ``tests/fourth_case/`` and is registered only by the environment
(``PEAKPROOF_CASES=counter_case``, that folder on ``PYTHONPATH``). Through peakproof's
normal entry points, each in a child process from the repository root:

1. its properties and quality tests run under pytest (the plugin's ``counter_target``);
2. ``peakproof serve counter`` serves its reference target;
3. ``peakproof run counter --scale 1 --duration 2`` runs properties and the load scenario
   ``counter-peak`` against it and says PASS;
4. the registry holds ``counter`` with the variable and not without it, and no shared file
   names the case's package;
5. its checks register themselves (``COUNTER``, as the built-in cases' do) and its load report
   is a pure function of a history, which its locustfile only calls.

Nothing here asserts on timing: the load is 200 increments/s, for any machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest



ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "fourth_case"
SHARED = ("peakproof", "loadtests", "properties", "targets", "conftest.py", "pyproject.toml")


def case_env(registered: bool = True) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(HERE) + os.pathsep + str(ROOT), PYTHONDONTWRITEBYTECODE="1",
               HYPOTHESIS_PROFILE="ci")  # ci: no example database written into the checkout
    env.pop("PEAKPROOF_CASES", None)
    if registered:
        env["PEAKPROOF_CASES"] = "counter_case"
    return env


def run(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env or case_env(), capture_output=True, text=True,
                          timeout=timeout)
    return proc


def shown(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-3000:]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: object = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.timeout(700)
def test_its_properties_and_quality_tests_pass_under_pytest() -> None:
    proc = run(["-m", "pytest", "tests/fourth_case/props_counter.py", "tests/fourth_case/quality_counter.py", "-q",
                "-p", "no:cacheprovider"], timeout=600)
    assert proc.returncode == 0, shown(proc)
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 10, shown(proc)
    assert not re.search(r"\d+ (failed|error)", proc.stdout), shown(proc)
    # the plugin's summary of chances: both checks were put to the test
    for check in ("counter_never_goes_back", "every_increment_counted"):
        assert re.search(rf"{check}: [1-9]", proc.stdout), shown(proc)


@pytest.mark.timeout(120)
def test_peakproof_serve_counter_serves_its_reference_target(tmp_path: Path) -> None:
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "peakproof", "serve", "counter", "--host", "127.0.0.1", "--port",
                             str(port), "--db", str(tmp_path / "counter.sqlite3")], cwd=ROOT, env=case_env(),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/counter"
    try:
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = http("GET", base + "/health")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        assert health is not None, f"no answer on {base}/health; exit {proc.poll()}; log:\n" + \
            (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
        assert health == (200, {"status": "ok", "policy": "locked"})
        assert http("GET", base) == (200, {"value": 0})
        assert http("POST", base + "/increments", {"by": 3}) == (200, {"value": 3})
        assert http("POST", base + "/increments", {"by": 4}) == (200, {"value": 7})
        status, doc = http("POST", base + "/increments", {"by": 0})
        assert status == 400 and doc["error"] == "invalid_by" and doc["message"]
        status, doc = http("GET", base + "/nowhere")
        assert status == 404 and doc["error"] == "not_found"
        status, doc = http("DELETE", base)
        assert status == 405 and doc["error"] == "method_not_allowed"
        assert http("GET", base) == (200, {"value": 7})
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()


@pytest.mark.timeout(1000)
def test_peakproof_run_counter_passes_through_properties_and_its_load_scenario(tmp_path: Path) -> None:
    proc = run(["-m", "peakproof", "run", "counter", "--scale", "1", "--duration", "2", "--calibrated-rate", "1000",
                "--report-dir", str(tmp_path / "reports")], timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, shown(proc)
    assert "peakproof verdict for counter: PASS" in out, shown(proc)
    assert re.search(r"\[ok\] properties \(Hypothesis\): \d+ passed", out), shown(proc)
    assert "[ok] load scenario counter-peak" in out, shown(proc)
    for check in ("offered_load_matches_curve", "counter_never_goes_back", "every_increment_counted"):
        assert f"[ok] {check}:" in out, shown(proc)
    assert list((tmp_path / "reports").glob("counter-peak-*")), "the load stage wrote no report"


def registered(env: dict[str, str]) -> list[str]:
    proc = run(["-c", "from peakproof.cases import all_cases; print(','.join(all_cases()))"], timeout=120, env=env)
    assert proc.returncode == 0, shown(proc)
    return proc.stdout.strip().split(",")


@pytest.mark.timeout(300)
def test_only_the_environment_registers_the_case() -> None:
    without, with_it = registered(case_env(registered=False)), registered(case_env())
    assert "counter" not in without and without, without
    assert with_it == [*without, "counter"], with_it  # rank 300: after the built-in cases
    naming = [str(p.relative_to(ROOT)) for name in SHARED for p in ([ROOT / name] if (ROOT / name).is_file()
                                                                    else sorted((ROOT / name).rglob("*.py")))
              if "counter_case" in p.read_text(encoding="utf-8", errors="replace")]
    assert naming == [], f"shared files name the counter case: {naming}"


PURE_REPORT = """
import json
from counter_case import COUNTER, COUNTER_CHECKS
from counter_case.report import judge_counter
from peakproof.history import HandHistory

h = HandHistory()
h.at(0.0).ok("read", {}, {"value": 0})
h.at(1.0).ok("increment", {"by": 2}, {"value": 2})
h.at(2.0).ok("increment", {"by": 3}, {"value": 4})  # 2 + 3 is 5: one unit lost
h.at(3.0).ok("read", {}, {"value": 4})
checks, charts, details = judge_counter(h.history)
print(json.dumps({"registered": COUNTER.names(), "listed": [c.__name__ for c in COUNTER_CHECKS],
                  "valid": {r.name: r.valid for r in checks}, "charts": [c.title for c in charts],
                  "details": sorted(details)}))
"""


def test_its_checks_are_registered_and_its_report_is_a_pure_function_of_the_history() -> None:
    import ast

    proc = run(["-c", PURE_REPORT], timeout=60)
    assert proc.returncode == 0, shown(proc)
    got = json.loads(proc.stdout)
    assert got["registered"] == got["listed"] == ["counter_never_goes_back", "every_increment_counted"]
    # judged from the history alone (no target, no socket): the lost unit is found
    assert got["valid"] == {"counter_never_goes_back": True, "every_increment_counted": False}, got
    assert got["charts"] == ["The value each ok increment left"] and got["details"] == ["counter"], got
    # the report imports no I/O, and the locustfile judges only through it
    report = ast.parse((HERE / "counter_case" / "report.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(report) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "typing", "peakproof.checks", "peakproof.history", "peakproof.report",
                        "checks"}, imported
    load = (HERE / "counter_load.py").read_text(encoding="utf-8")
    assert "return judge_counter(history)" in load and "check_counter" not in load


@pytest.mark.timeout(1000)
def test_peakproof_run_counter_fails_the_racy_policy(tmp_path: Path) -> None:
    # the served policy goes through the same path: concurrent increments on the racy target are lost
    proc = run(["-m", "peakproof", "run", "counter", "--policy", "racy", "--skip-load",
                "--report-dir", str(tmp_path / "reports")], timeout=900)
    assert proc.returncode == 1, shown(proc)
    assert "peakproof verdict for counter: FAIL" in proc.stdout, shown(proc)
    assert "[FAIL] properties (Hypothesis)" in proc.stdout, shown(proc)
