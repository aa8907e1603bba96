"""A check the properties never gave a chance is INCONCLUSIVE, and the sentence says what the run did instead:
how its operations ended, the commonest first (a shop whose every reserve was refused gives the hold's checks
none, and the reader must see that, not "run longer")."""

from __future__ import annotations

from types import SimpleNamespace

from peakproof import history
from peakproof.history import FAIL, OK, History
from peakproof.pytest_session import PropertiesSession


def config_without_waivers() -> SimpleNamespace:
    return SimpleNamespace(getoption=lambda name, default=None: default, stash={})


def test_operations_completed_while_a_property_runs_are_counted_by_how_they_ended() -> None:
    session = PropertiesSession()
    h = History(clock=lambda: 0.0)
    history.WATCHERS.append(session.op_ended)
    try:
        for _ in range(3):
            h.complete(h.invoke("client-1", "reserve", {}), FAIL, None, "idempotency_key_reused")
        h.complete(h.invoke("client-1", "get_quota", {}), OK, {"available": 5})
        h.complete(h.invoke("nemesis", "fault_start", {}), OK)  # the harness's own: not what the target did
    finally:
        history.WATCHERS.remove(session.op_ended)
    h.complete(h.invoke("client-1", "reserve", {}), OK)  # outside a property: not counted
    assert session.ended == {"reserve fail idempotency_key_reused": 3, "get_quota ok": 1}
    assert session.how_ops_ended() == "reserve fail idempotency_key_reused: 3; get_quota ok: 1"


def test_a_check_without_a_chance_says_how_the_run_s_operations_ended(monkeypatch) -> None:
    import peakproof.pytest_session as ps

    monkeypatch.setattr(ps, "waived_checks", lambda config: {}, raising=False)
    session = PropertiesSession()
    session.chances.in_properties = {"expired_hold_is_never_sold": (0, "pay after a lapse"), "no_oversell": (40, "")}
    session.ended = {"reserve fail idempotency_key_reused": 120, "get_quota ok": 40}
    lines = session.not_exercised(config_without_waivers())
    assert len(lines) == 1 and lines[0].startswith("expired_hold_is_never_sold: no chance")
    assert lines[0].endswith("the run's operations ended so: reserve fail idempotency_key_reused: 120; get_quota ok: 40")
