"""The room the xdist workers share (tests/support/room.py): who may run beside whom, and the order that
puts the tests which read the machine at the heads of the workers' first shares."""

from __future__ import annotations

from pathlib import Path

from tests.support.room import ALONE, BUSY, GRACE, QUIET, Room, first_shares, fits


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
    assert [kinds[s[0]] for s in shares] == [QUIET] * 4  # every worker begins with a quiet one: side by side
    assert [kinds[i] for i in shares[0][:2]] == [QUIET, ALONE]  # then the alone ones, in turn: worker 0's first
    assert [kinds[i] for i in shares[1][:2]] == [QUIET, ALONE]
    assert all(kinds[i] == BUSY for s in shares for i in s[2 if s in shares[:2] else 1:])
    assert first_shares(kinds, 1)[:6] == [10, 11, 12, 13, 14, 15]  # one process: quiet, alone, then the rest


def test_no_busy_test_enters_before_every_worker_has_looked_in(tmp_path: Path) -> None:
    # the workers start a second or so apart: a busy test on the first to start slipped in ahead of the alone
    # tests of the others, which then waited out its whole length
    first = Room(tmp_path / "room", workers=2)
    assert not first._edit(lambda r: first.admits(BUSY, r, now=100.0))
    late = Room(tmp_path / "room", workers=2)
    late.me = "1"  # the other worker (pid 1 is always alive), its first test alone
    assert late._edit(lambda r: late.admits(ALONE, r, now=101.0))
    late._edit(lambda r: r["in"].update({late.me: ALONE}) or True)
    assert not first._edit(lambda r: first.admits(BUSY, r, now=102.0))  # now it waits for the alone one
    late._edit(lambda r: r["in"].pop(late.me) and True)
    assert first._edit(lambda r: first.admits(BUSY, r, now=103.0))


def test_a_worker_that_never_looks_in_holds_the_busy_tests_back_no_longer_than_the_grace(tmp_path: Path) -> None:
    room = Room(tmp_path / "room", workers=3)
    assert not room._edit(lambda r: room.admits(BUSY, r, now=100.0))
    assert room._edit(lambda r: room.admits(BUSY, r, now=100.0 + GRACE))


def test_the_early_busy_tests_each_begin_a_worker_s_busy_tests_the_last_workers_first() -> None:
    kinds = [BUSY] * 5 + [ALONE] * 7 + [BUSY] * 6 + [BUSY] * 2
    order = first_shares(kinds, 4, early=[18, 19])
    assert sorted(order) == list(range(len(kinds)))
    shares = [order[0:5], order[5:10], order[10:15], order[15:20]]  # work stealing's first shares: 5 each
    assert [[kinds[i] for i in s[:2]] for s in shares[:3]] == [[ALONE, ALONE]] * 3  # the alone ones in turn
    assert kinds[shares[3][0]] == ALONE
    assert shares[3][1] == 18 and shares[2][2] == 19  # one early test first among the busy ones of the last two
    rest = [i for s in shares for i in s if kinds[i] == BUSY and i not in (18, 19)]
    assert rest == [0, 1, 2, 3, 4, *range(12, 18)]  # the others in the collection's order


def test_early_tests_begin_every_worker_s_busy_tests_even_where_the_alone_ones_fill_the_share() -> None:
    # the examples' tier: 10 alone tests, 6 early ones, 31 tests on 6 workers (shares of 5): each worker's first
    # busy test is an early one, so all six begin together when the alone ones are done
    kinds = [ALONE] * 10 + [BUSY] * 21
    early = [10, 11, 12, 13, 14, 15, 16]  # one more than the workers, the longest first
    order = first_shares(kinds, 6, early=early)
    assert sorted(order) == list(range(len(kinds)))
    sizes = [5, 5, 5, 5, 5, 6]
    shares = [order[sum(sizes[:k]):sum(sizes[:k + 1])] for k in range(6)]
    firsts = [next(i for i in s if kinds[i] == BUSY) for s in shares]
    assert sorted(firsts) == early[:6], shares
    assert firsts[5] == 10 and firsts[0] == 15  # the last workers' first
    assert shares[0].index(16) == shares[0].index(15) + 1  # the seventh, the shortest: behind the sixth
