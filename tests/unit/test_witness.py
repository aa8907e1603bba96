"""Witnesses (peakproof.witness, peakproof.replay, peakproof.shrink) without a socket: each case finds the
operations a violation bears on in a hand-written history; ids are renamed and mapped per argument; the
shrink keeps a candidate only while a (simulated) target fails the check again, and says what it reached."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from peakproof.cases.feed.checks import check_feed
from peakproof.cases.notifications.witness import WITNESS as NOTIFICATIONS, _fresh_address
from peakproof.cases.tickets import Tolerance, check_tickets
from peakproof.cases.tickets.witness import WITNESS as TICKETS
from peakproof.cases.feed.witness import WITNESS as FEED
from peakproof.cases import run_of
from peakproof.checks import CheckResult
from peakproof.errors import UsageError
from peakproof.history import HandHistory
from peakproof.replay import Replayer, Try, _dependencies, _learn, _renamed, steps_of
from peakproof.shrink import shrink
from peakproof.spec import RunSpec
from peakproof.witness import Step, Witness, curl_line

EXACT = Tolerance(skew=0.0, release_lag=0.0)


def an_oversell() -> HandHistory:
    """Two buyers hold the one unit of 'q' at once; 'other' is a quota nobody oversold."""
    h = HandHistory()
    h.ok("put_quota", {"quota_id": "other", "capacity": 5, "hold_seconds": 60.0}, {})
    h.ok("put_quota", {"quota_id": "q", "capacity": 1, "hold_seconds": 60.0}, {})
    a = h.op("ok", "reserve", {"quota_id": "q", "buyer_id": "ann", "quantity": 1, "request_id": "r-a"},
             {"reservation_id": "1", "quantity": 1, "status": "held", "expires_at": 60.0}, pending=True)
    b = h.op("ok", "reserve", {"quota_id": "q", "buyer_id": "bob", "quantity": 1, "request_id": "r-b"},
             {"reservation_id": "2", "quantity": 1, "status": "held", "expires_at": 60.0}, pending=True)
    h.ok("reserve", {"quota_id": "other", "buyer_id": "cem", "quantity": 1, "request_id": "r-c"},
         {"reservation_id": "3", "quantity": 1, "status": "held", "expires_at": 60.0})
    h.finish(a)
    h.finish(b)
    h.ok("confirm", {"reservation_id": "2"}, {"reservation_id": "2", "status": "sold", "quantity": 1})
    h.ok("confirm", {"reservation_id": "3"}, {"reservation_id": "3", "status": "sold", "quantity": 1})
    return h


def test_a_tickets_oversell_is_witnessed_by_its_quota_and_the_reservations_holding_at_that_moment() -> None:
    h = an_oversell()
    result = next(r for r in check_tickets(h.history, EXACT) if r.name == "no_oversell")
    assert result.valid is False
    key, ops = TICKETS.find(h.history.ops, result)[:2]
    assert key == "quota 'q'"
    assert {op.args.get("quota_id") for op in ops if "quota_id" in op.args} == {"q"}
    assert [op.f for op in ops].count("reserve") == 2 and any(op.f == "put_quota" for op in ops)
    assert all(op.args.get("reservation_id") != "3" for op in ops)  # the other quota's sale is not its


def test_a_quota_created_outside_the_history_gets_its_creation_from_the_reads() -> None:
    h = an_oversell()
    h.history.ops = [op for op in h.history.ops if op.f != "put_quota"]  # a load's set-up is not in its history
    h.ok("read_quota", {"quota_id": "q"}, {"capacity": 1, "available": -1, "held": 1, "sold": 1})
    result = next(r for r in check_tickets(h.history, EXACT) if r.name == "stock_is_conserved")
    assert result.valid is False
    _, ops = TICKETS.find(h.history.ops, result)[:2]
    creation = [op for op in ops if op.f == "put_quota"]
    assert len(creation) == 1 and creation[0].args["capacity"] == 1 and creation[0].args["quota_id"] == "q"
    steps, size = steps_of(ops, TICKETS.setup)
    assert steps[0].setup and steps[0].f == "put_quota" and size == len(ops)


def test_a_feed_page_that_repeats_a_post_is_witnessed_by_its_reader_their_follows_and_their_authors_posts() -> None:
    h = HandHistory()
    h.ok("follow", {"user_id": "u0", "followee_id": "u1"}, {})
    h.ok("follow", {"user_id": "x", "followee_id": "y"}, {})  # another reader: not in the witness
    for i, t in ((1, 1.0), (2, 2.0)):
        h.at(t).ok("publish", {"author_id": "u1", "text": f"p{i}"}, {"post_id": f"p{i}", "author_id": "u1",
                                                                      "created_at": t})
    h.at(2.5).ok("publish", {"author_id": "y", "text": "elsewhere"}, {"post_id": "py", "author_id": "y",
                                                                       "created_at": 2.5})
    item = {"post_id": "p2", "author_id": "u1", "created_at": 2.0}
    h.at(3.0).ok("read", {"user_id": "u0", "limit": 1, "cursor": None}, {"items": [item], "next_cursor": "2"})
    h.at(4.0).ok("publish", {"author_id": "u1", "text": "p3"}, {"post_id": "p3", "author_id": "u1", "created_at": 4.0})
    h.at(5.0).ok("read", {"user_id": "u0", "limit": 1, "cursor": "2"}, {"items": [item], "next_cursor": "3"})
    result = next(r for r in check_feed(h.history) if r.name == "pages_do_not_skip_or_repeat")
    assert result.valid is False
    key, ops = FEED.find(h.history.ops, result)[:2]
    assert "'u0'" in key
    assert [op.f for op in ops if op.f != "follow"] == ["publish", "publish", "read", "publish", "read"]
    assert all(op.args.get("user_id", "u0") == "u0" and op.args.get("author_id", "u1") == "u1" for op in ops)


def test_a_duplicate_delivery_is_witnessed_by_its_event_and_recipient_and_the_calls_found() -> None:
    h = HandHistory()
    h.ok("put_recipient", {"recipient_id": "r1", "channels": ["push", "sms"], "addresses": {"push_token": "t"}}, {})
    h.ok("put_recipient", {"recipient_id": "r2", "channels": ["push"], "addresses": {"push_token": "u"}}, {})
    h.ok("notify", {"event_id": "e1", "recipient_id": "r1", "priority": "urgent", "title": "t", "body": "b"},
         {"notification_id": "n1", "status": "queued"})
    h.ok("notify", {"event_id": "e2", "recipient_id": "r2", "priority": "urgent", "title": "t", "body": "b"},
         {"notification_id": "n2", "status": "queued"})
    result = CheckResult("one_delivery_per_event", False, {}, "event 'e1' reached recipient 'r1' 2 times, on push, sms",
                         [(("push", 1796400000.25), ("sms", 1796400000.5))])
    key, ops, context = NOTIFICATIONS.find(h.history.ops, result)
    assert key == "event 'e1' to recipient 'r1'"
    assert [(op.f, op.args.get("recipient_id")) for op in ops] == [("put_recipient", "r1"), ("notify", "r1")]
    assert "push call at" in context[0] and "sms call at" in context[0]


def test_a_fresh_address_keeps_its_channels_format() -> None:
    assert _fresh_address("email", "ann@example.com", "rp1") == "ann+rp1@example.com"
    phone = _fresh_address("sms", "+905551234567", "rp1")
    assert phone.startswith("+90555123") and phone[1:].isdigit() and phone != "+905551234567"
    assert _fresh_address("push", "tok", "rp1") == "tok-rp1"


def test_ids_the_target_hands_back_are_mapped_per_argument_so_a_cursor_is_never_taken_for_a_post() -> None:
    produced = {"post_id": "post_id", "next_cursor": "cursor"}
    ids: dict[Any, Any] = {}
    _learn({"post_id": "2"}, {"post_id": "83"}, produced, ids)  # the found post "2" is post "83" this time
    _learn({"items": [], "next_cursor": "2"}, {"items": [], "next_cursor": "2"}, produced, ids)
    args = _renamed({"user_id": "u0", "limit": 1, "cursor": "2"}, ("user_id",), produced, ids, "rp9")
    assert args == {"user_id": "u0-rp9", "limit": 1, "cursor": "2"}
    assert _renamed({"post_id": "2"}, (), produced, ids, "rp9") == {"post_id": "83"}
    # an id this try was never handed: the step is not sent (it would act on the found run's own data)
    assert _renamed({"post_id": "7"}, (), produced, ids, "rp9") is None


def test_a_step_waits_for_the_step_whose_answer_names_its_id() -> None:
    steps = [Step("0", "reserve", {"quota_id": "q"}, outcome="ok", answer={"reservation_id": "5"}),
             Step("0", "reserve", {"quota_id": "q"}, outcome="ok", answer={"reservation_id": "6"}),
             Step("0", "confirm", {"reservation_id": "6"}), Step("0", "read_quota", {"quota_id": "q"})]
    assert _dependencies(steps, {"reservation_id": "reservation_id"}) == [set(), set(), {1}, set()]


def test_a_witness_file_round_trips_and_a_wrong_file_is_a_usage_error_that_says_what_to_give() -> None:
    w = Witness("tickets", "no_oversell", "oversold", "quota 'q'", [Step("a", "reserve", {"quota_id": "q"}, 0.5)], 9,
                tries=10, reproduced=6, curl=[curl_line("POST", "http://127.0.0.1:1/x", {"A": "b"}, b'{"k": "it\'s"}')])
    back = Witness.from_json(json.loads(json.dumps(w.to_json())))
    assert back == w and "reproduced 6 of 10 tries" in back.headline()
    assert "'{\"k\": \"it'\"'\"'s\"}'" in back.curl[0]  # the body quoted for a shell
    with pytest.raises(UsageError, match="peakproof-witness/1"):
        Witness.from_json({"steps": []})


# -- the shrink, against a simulated target ---------------------------------------------------------------


class Simulated(Replayer):
    """A target whose check fails again when ``fails(steps, sequential)`` says so: no socket, no clock."""

    def __init__(self, fails: Any) -> None:
        super().__init__(TICKETS, run_of(RunSpec(case="tickets", target_url="http://127.0.0.1:9")), "no_oversell")
        self.fails = fails

    def once(self, steps: list[Step], sequential: bool, record: bool = False) -> Try:
        self.tries += 1
        bad = self.fails(steps, sequential)
        return Try(bad, CheckResult("no_oversell", not bad, first_violation="again" if bad else None), [],
                   ["curl one"] if record else [], [None] * len(steps))


def burst(n: int, capacity: int = 40) -> Witness:
    setup = Step("setup", "put_quota", {"quota_id": "q", "capacity": capacity}, setup=True)
    rest = [Step(f"b{i}", "reserve", {"quota_id": "q", "buyer_id": f"b{i}"}, at=i * 0.01) for i in range(n)]
    return Witness("tickets", "no_oversell", "oversold", "quota 'q'", [setup, *rest], n + 1)


def more_at_once_than_the_quota(steps: list[Step], sequential: bool) -> bool:
    """The race: more buyers at one instant than the quota holds (each reads it free, then takes it)."""
    capacity = next(s.args["capacity"] for s in steps if s.setup)
    at_once = max((sum(1 for s in steps if not s.setup and s.at == t) for t in {s.at for s in steps}), default=0)
    return not sequential and at_once > capacity


def test_a_race_shrinks_to_two_buyers_at_once_on_one_unit_and_stays_concurrent() -> None:
    out = shrink(Simulated(more_at_once_than_the_quota), burst(10, capacity=5), seconds=60)
    assert [s.args["capacity"] for s in out.steps if s.setup] == [1]
    assert len([s for s in out.steps if not s.setup]) == 2 and not out.sequential
    assert out.reproduced == out.tries == 10 and out.found_size == 11 and "shrunk from 11 to 3" in out.shrink


def test_a_bug_that_needs_no_concurrency_is_found_sequential_with_its_curl_lines() -> None:
    out = shrink(Simulated(lambda steps, seq: any(s.args.get("buyer_id") == "b3" for s in steps)), burst(6), 60)
    assert out.sequential and [s.args.get("buyer_id") for s in out.steps if not s.setup] == ["b3"]
    assert out.curl == ["curl one"]


def test_a_witness_that_never_fails_again_is_kept_whole_and_said_not_reproduced() -> None:
    w = burst(5)
    out = shrink(Simulated(lambda steps, seq: False), w, 60)
    assert out.steps == w.steps and out.reproduced == 0 and out.tries == 10
    assert "not reproduced in 10 tries" in out.rate() and "not shrunk" in out.shrink


def test_the_shrink_stops_at_its_time_bound_and_says_what_it_reached() -> None:
    class Slow(Simulated):
        def once(self, steps: list[Step], sequential: bool, record: bool = False) -> Try:
            import time

            time.sleep(0.1)  # a try takes 0.1 s whatever the machine: the bound comes after 4 of the 10+ needed
            return super().once(steps, sequential, record)

    out = shrink(Slow(more_at_once_than_the_quota), burst(200, capacity=5), seconds=0.5)
    assert "stopped at its time bound" in out.shrink and out.tries >= 1


def test_a_table_row_says_who_what_when_and_how_it_was_answered() -> None:
    s = replace(Step("buyer-1", "reserve", {"quota_id": "q", "quantity": 1}, at=0.0125), outcome="ok",
                answer={"reservation_id": "9"}, took=0.004)
    n, who, what, when, answer = s.cells(3)
    assert (n, who, what, when) == ("3", "buyer-1", "reserve(quota_id=q, quantity=1)", "+12.5 ms")
    assert answer == 'ok {"reservation_id":"9"} in 4.0 ms'


def test_a_stage_with_no_time_to_replay_keeps_each_witness_as_found_and_writes_its_files(tmp_path: Any) -> None:
    from peakproof.shrink import reproduce

    h = an_oversell()
    results = check_tickets(h.history, EXACT)
    spec = RunSpec(case="tickets", target_url="http://127.0.0.1:9", replay_seconds=0)
    out = reproduce(run_of(spec), h.history.ops, results, seconds=0, directory=str(tmp_path), stem="run")
    assert {w.check for w in out} == {r.name for r in results if r.valid is False} and out
    w = next(w for w in out if w.check == "no_oversell")
    assert w.tries == 0 and "not replayed" in w.rate() and w.size == w.found_size
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"run-{x.check}.replay.{ext}" for x in out for ext in ("json", "py"))


def test_a_replay_that_raises_loses_only_its_reproduction_and_says_why(tmp_path: Any, monkeypatch: Any) -> None:
    import peakproof.shrink as shrinking

    def broken(*_: Any, **__: Any) -> Witness:
        raise RuntimeError("the driver fell over")

    monkeypatch.setattr(shrinking, "shrink", broken)
    h = an_oversell()
    spec = RunSpec(case="tickets", target_url="http://127.0.0.1:9")
    out = shrinking.reproduce(run_of(spec), h.history.ops, check_tickets(h.history, EXACT), seconds=30,
                              directory=str(tmp_path), stem="run")
    assert out and all("its replay raised RuntimeError: the driver fell over" in w.rate() for w in out)
