"""The notifications properties against a target with the rules of a held-out service: 8 delivery
workers, providers answering in 30 ms, ``--backoff 0.3 --answer-timeout 2 --breaker-window 200
--breaker-failures 24`` stated to the harness. With such rules the reminder flood must grow until a
backlog forms (the target drains 80 at once), and the breaker's step must fill a window of 200: a
target with one FIFO for both priorities and one whose breaker counts permanent failures each FAIL
``pytest properties/test_notifications.py --target-url`` alone, and the reference passes it with
both checks exercised.

About four minutes in all (real time: the rules are the target's), so these run on request:
``PEAKPROOF_HELD_OUT=1 pytest tests/quality/test_held_out_rules.py``.
"""

from __future__ import annotations

import os
import re

import pytest

from .test_served_mutants import notifications_properties
from tests.support.runs import PropertiesRun, failed_checks

pytestmark = [pytest.mark.skipif(os.environ.get("PEAKPROOF_HELD_OUT") != "1",
                               reason="[opt-in] about 4 min of real time: PEAKPROOF_HELD_OUT=1 runs it")]

SERVED = dict(backoff=0.3, call_timeout=2, breaker_window=200, breaker_failures=24, threads=8)
RULES = ("--backoff", "0.3", "--answer-timeout", "2", "--breaker-window", "200", "--breaker-failures", "24")


def _properties(mutant: str | None) -> PropertiesRun:
    # each FAIL's witness replayed and shrunk against the mutant for up to 90 s (the suite's default is none)
    return notifications_properties(mutant, SERVED, (*RULES, "--replay-seconds", "90"), latency=0.03)


@pytest.mark.parametrize("mutant, caught_by", [
    ("notifications-one-fifo", "urgent_overtakes_reminder_backlog"),
    ("notifications-breaker-counts-permanent", "breaker_counts_only_transient"),
])
def test_a_broken_service_with_held_out_rules_fails_the_url_properties(mutant: str, caught_by: str) -> None:
    code, out, record = _properties(mutant)
    assert code == 1 and caught_by in failed_checks(record), out[-3000:]
    print(f"\n{mutant}: " + next(ln.strip() for ln in out.splitlines() if "first violation" in ln)[:300])
    # every FAIL carries a witness: the operations it bears on, replayed against the mutant and shrunk
    witnesses = re.findall(r"witness of (\w+) on (.*?): (\d+) operations \((\w+); ([\d,]+) in the window as found; "
                           r"(.*?)\); (reproduced \d+ of \d+ tries|seen once, not reproduced in \d+ tries|not replayed)",
                           out)
    assert any(w[0] == caught_by for w in witnesses), out[-3000:]
    for check, key, size, mode, before, shrunk, rate in witnesses:
        print(f"  witness of {check} on {key}: {before} operations as found -> {size} ({mode}; {shrunk}); {rate}")


def test_the_reference_with_held_out_rules_passes_them_with_both_checks_exercised() -> None:
    code, out, _ = _properties(None)
    assert code == 0, out[-3000:]
    for check in ("urgent_overtakes_reminder_backlog", "breaker_counts_only_transient"):
        found = re.search(rf"^\s+{check}: ([\d,]+)", out, re.M)
        assert found and int(found.group(1).replace(",", "")) > 0, out[-3000:]
