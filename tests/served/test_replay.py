"""A witness replayed over real HTTP: against a served target that sells a lapsed hold, the witness (a hold
paid after it lapsed, among steps that have nothing to do with it) fails again every time, shrinks to the
hold and its late payment, and its script and ``peakproof replay`` exit 1; against the reference the same
witness never fails again, and both exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from peakproof.cases import get_case
from peakproof.cases import run_of
from peakproof.launch import ServedTarget
from peakproof.replay import Replayer, hooks_for
from peakproof.shrink import shrink
from peakproof.spec import RunSpec
from peakproof.witness import Step, Witness, write_files
from tests.support.mutants import served



ROOT = Path(__file__).resolve().parents[2]
HOLD = 0.3  # s: the hold lapses well before its payment at +2 s (beyond the checks' 0.25 s skew); compressed to a
# half (+1 s) it is still late by 0.45 s, on a machine of any speed; to a tenth (+0.2 s) it is not late


def late_payment() -> Witness:
    """A hold paid 2 s after it was granted on a 0.3 s hold window, beside a read and another buyer's hold."""
    steps = [Step("setup", "put_quota", {"quota_id": "late", "capacity": 3, "hold_seconds": HOLD}, setup=True),
             Step("ann", "reserve", {"quota_id": "late", "buyer_id": "ann", "quantity": 1, "request_id": "a1"}, 0.0,
                  "ok", {"reservation_id": "R1"}),
             Step("bob", "reserve", {"quota_id": "late", "buyer_id": "bob", "quantity": 1, "request_id": "b1"}, 0.05,
                  "ok", {"reservation_id": "R2"}),
             Step("reader", "read_quota", {"quota_id": "late"}, 0.1, "ok"),
             Step("ann", "confirm", {"reservation_id": "R1"}, 2.0, "ok", {"reservation_id": "R1", "status": "sold"})]
    return Witness("tickets", "expired_hold_is_never_sold", "a lapsed hold was sold", "quota 'late'", steps, 5)


@pytest.fixture(scope="module")
def selling_lapsed_holds() -> Iterator[str]:
    with served("tickets-sells-expired-holds") as t:
        yield t.url


@pytest.fixture(scope="module")
def reference() -> Iterator[str]:
    with ServedTarget(get_case("tickets")) as t:
        yield t.url


def replayer(url: str, check: str = "expired_hold_is_never_sold") -> Replayer:
    run = run_of(RunSpec(case="tickets", target_url=url))
    hooks = hooks_for(run.case)
    assert hooks is not None
    return Replayer(hooks, run, check)


def test_a_late_payment_fails_again_on_the_target_that_sells_lapsed_holds_and_shrinks_to_its_hold(
        selling_lapsed_holds: str) -> None:
    out = shrink(replayer(selling_lapsed_holds), late_payment(), seconds=60)
    assert out.reproduced == out.tries == 10, out.lines()
    assert out.sequential and [s.f for s in out.steps] == ["put_quota", "reserve", "confirm"], out.lines()
    assert out.steps[2].at >= HOLD, out.lines()  # the gap that made it late survives the compression
    assert out.curl and any("/confirm" in line for line in out.curl), out.curl
    print("\n".join(out.lines()))


def test_the_same_witness_never_fails_again_on_the_reference(reference: str) -> None:
    out = shrink(replayer(reference), late_payment(), seconds=10)
    assert out.reproduced == 0 and out.tries >= 1, out.lines()
    assert "not reproduced" in out.rate() and out.steps == late_payment().steps


def test_its_script_and_peakproof_replay_exit_1_where_it_fails_again_and_0_where_it_does_not(
        selling_lapsed_holds: str, reference: str, tmp_path: Path) -> None:
    w = late_payment()
    w.target = {"url": selling_lapsed_holds, "spec": RunSpec(case="tickets", target_url=selling_lapsed_holds).to_json()}
    data, script = write_files(w, tmp_path, "late-payment")
    assert json.loads(data.read_text())["format"] == "peakproof-witness/1"
    mine = subprocess.run([sys.executable, str(script), "--tries", "2"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert mine.returncode == 1 and "failed again in 2 of 2 tries" in mine.stdout, mine.stdout + mine.stderr
    theirs = subprocess.run([sys.executable, "-m", "peakproof", "replay", str(data), reference, "--tries", "2"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert theirs.returncode == 0 and "failed again in 0 of 2 tries" in theirs.stdout, theirs.stdout + theirs.stderr
