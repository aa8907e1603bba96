"""``no_server_errors``: the properties' error budget. A 5xx, a timeout, a reset or an off-contract
answer to a request the contract says must succeed is a finding, named with its request; refusals
the contract allows are answers; a timeout while an injected fault was in force is the fault's."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path


from peakproof import nemesis
from peakproof.history import FAIL, INFO, OK, History
from peakproof.slo import no_server_errors, properties_error_budget

ROOT = Path(__file__).resolve().parents[2]


def history() -> History:
    ticks = itertools.count()
    return History(lambda: float(next(ticks)))


def request(h: History, outcome: str, value: object, f: str = "reserve", error: str | None = None) -> None:
    op = h.invoke("buyer", f, {"quota_id": "q", "quantity": 1})
    h.complete(op, outcome, value, error)


def test_one_500_among_answers_fails_the_properties_naming_the_request_and_the_answer() -> None:
    h = history()
    for _ in range(9):
        request(h, OK, {"reservation_id": "r"})
    request(h, INFO, "database_unavailable", error="HTTP 500: database unavailable")
    r = no_server_errors(h.ops)
    assert r.valid is False and r.counts["errors"] == 1 and r.chances == 10
    assert "reserve(quota_id='q', quantity=1) answered database_unavailable: HTTP 500" in r.first_violation
    assert "Actual 10.00% of 10 reserve requests" in r.first_violation and "Limit 0.00%" in r.first_violation


def test_refusals_the_contract_allows_are_answers_not_errors() -> None:
    h = history()
    request(h, FAIL, "sold_out")
    request(h, FAIL, "busy")
    request(h, OK, {})
    assert no_server_errors(h.ops).valid is True


def test_a_timeout_is_excused_only_while_an_injected_fault_is_in_force() -> None:
    h = history()
    request(h, INFO, "timeout")  # before any fault: the target's
    nemesis.inject(h, "slow_providers", lambda: True, latency_s=1.0)
    request(h, INFO, "timeout")  # during it: the fault's
    request(h, INFO, "http_500")  # a 500 is never the fault's
    nemesis.lift(h, "slow_providers", lambda: True)
    r = no_server_errors(h.ops)
    assert r.valid is False and r.counts["errors"] == 2
    assert r.counts["excused_during_faults"] == {"slow_providers": 1}
    assert "answered timeout" in r.first_violation


def test_the_budget_comes_from_the_runs_slo_and_is_none_by_default() -> None:
    assert properties_error_budget([]) == 0.0
    assert properties_error_budget(["reserve:p99<=100ms", "errors:rate<=20%"]) == 0.2
    h = history()
    for outcome, value in [(OK, {}), (OK, {}), (OK, {}), (OK, {}), (INFO, "reset")]:
        request(h, outcome, value)
    assert no_server_errors(h.ops, 0.2).valid is True
    assert no_server_errors(h.ops, 0.1).valid is False
def test_a_property_run_in_which_a_check_had_no_chance_exits_6_naming_it(tmp_path: Path) -> None:
    props = tmp_path / "properties"
    props.mkdir()
    (props / "test_p.py").write_text(
        "from peakproof.checks import Violations, assert_checks\n"
        "def test_held_but_untested():\n"
        "    assert_checks([Violations().result('urgent_overtakes_reminder_backlog', {}, chances=0,\n"
        "                                       chance_kind='urgent notifications behind a reminder backlog'),\n"
        "                   Violations().result('no_oversell', {}, chances=3, chance_kind='reservations')])\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p",
                           "no:cacheprovider", str(props)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))  # this checkout's peakproof
    out = proc.stdout + proc.stderr
    assert proc.returncode == 6, out
    assert "1 passed" in out and "urgent_overtakes_reminder_backlog: no chance to fail" in out
    assert "urgent notifications behind a reminder backlog" in out and "no_oversell: no chance" not in out
