"""The room the xdist workers share (tests/support/room.py): who may run beside whom, and the order that
puts the tests which read the machine at the heads of the workers' first shares."""

from __future__ import annotations

from pathlib import Path

from tests.support.room import ALONE, BUSY, QUIET, Room, first_shares, fits


def test_an_alone_test_enters_only_an_empty_room() -> None:
    assert fits(ALONE, "1", {}, {})
    assert fits(ALONE, "1", {"1": ALONE}, {})  # its own place, kept between two tests
    for other in (BUSY, QUIET, ALONE):
        assert not fits(ALONE, "1", {"2": other}, {})
    assert not fits(ALONE, "1", {}, {"2": QUIET})  # the quiet ones first: they all run side by side


def test_quiet_tests_share_the_room_with_each_other_and_nothing_else() -> None:
    assert fits(QUIET, "1", {"2": QUIET, "3": QUIET}, {})
    assert not fits(QUIET, "1", {"2": BUSY}, {})
    assert not fits(QUIET, "1", {"2": ALONE}, {})
    assert fits(QUIET, "1", {"2": QUIET}, {"3": ALONE})  # before an alone test that waits


def test_busy_tests_wait_while_a_test_that_reads_the_machine_waits() -> None:
    assert fits(BUSY, "1", {"2": BUSY}, {"3": BUSY})
    assert not fits(BUSY, "1", {}, {"3": QUIET})
    assert not fits(BUSY, "1", {}, {"3": ALONE})
    assert not fits(BUSY, "1", {"2": QUIET}, {})


def test_a_worker_keeps_its_place_between_two_tests_that_read_the_machine(tmp_path: Path) -> None:
    room = Room(tmp_path / "room")
    room.enter(ALONE)
    room.leave(QUIET)  # the next test is quiet: the worker waits at once, so no busy test slips in
    other = Room(tmp_path / "room")
    other.me = "1"  # another worker (pid 1 is always alive)
    assert not other._edit(lambda r: fits(BUSY, other.me, r["in"], r["waiting"]))
    room.enter(QUIET)
    room.leave(BUSY)
    assert other._edit(lambda r: fits(BUSY, other.me, r["in"], r["waiting"]))


def test_a_dead_worker_s_place_is_given_up(tmp_path: Path) -> None:
    room = Room(tmp_path / "room")
    room.state.write_text('{"in": {"999999999": "alone"}, "waiting": {}}')  # no such pid
    room.enter(BUSY)  # returns: the dead worker's alone test holds nothing
    assert room._edit(lambda r: list(r["in"]) == [room.me])


def test_the_tests_that_read_the_machine_head_the_workers_first_shares() -> None:
    kinds = [BUSY] * 10 + [QUIET] * 4 + [ALONE] * 2 + [BUSY] * 4
    order = first_shares(kinds, 4)
    assert sorted(order) == list(range(len(kinds)))  # every test, once
    # work stealing's first shares of 20 tests on 4 workers: 5, 5, 5, 5
    shares = [order[0:5], order[5:10], order[10:15], order[15:20]]
    assert [kinds[i] for i in shares[0][:3]] == [QUIET, ALONE, ALONE]  # worker 0: its quiet one, then the alone
    assert [kinds[s[0]] for s in shares[1:]] == [QUIET, QUIET, QUIET]
    assert all(kinds[i] == BUSY for s in shares for i in s[1 if s is not shares[0] else 3:])
    assert first_shares(kinds, 1)[:6] == [10, 11, 12, 13, 14, 15]  # one process: quiet, alone, then the rest

