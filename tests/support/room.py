"""Who runs beside whom under ``pytest -n``: one room the xdist workers share, and three kinds of tests.

* ``busy`` (every test not marked otherwise): beside any other busy test.
* ``quiet`` (``@pytest.mark.quiet``): a low-rate run that reads the machine but takes a few hundredths of a
  core (a shop that answers by sleeping, a ladder at a few arrivals a second): beside other quiet tests
  only. Each reads the others as neighbours far below what would leave its verdict undecided, and the
  suite's busy tests, which would, wait outside.
* ``alone`` (``@pytest.mark.alone``): a run that takes the machine (a load of hundreds a second, a
  calibration to the knee, a test that brings its own neighbour): beside nothing.

The room is a small JSON file (which worker is in, which waits, with what kind) edited under an
exclusive ``flock``; a worker waits by polling it. Quiet and alone tests go first (the quiet ones first of
all: an alone test waits while one waits): while one of them waits, no busy test enters, so they run one
phase after another rather than waiting out the busy tests one by one.
A worker keeps its place between two consecutive tests that are not busy, so no busy test slips between
them. A dead worker's entries are dropped (its pid is gone). No busy test enters before every worker has
looked in once (or :data:`GRACE` has passed): the workers start a second or so apart, and a busy test whose
worker came first slipped in ahead of the alone ones, which then waited its whole length (85 s in the
examples' tier, the machine half idle).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

BUSY, QUIET, ALONE = "busy", "quiet", "alone"
POLL = 0.1  # s between two looks at the room while waiting
GRACE = 30.0  # s a busy test waits at most for the workers not yet seen (one that died starting, say)


def fits(kind: str, me: str, inside: dict[str, str], waiting: dict[str, str]) -> bool:
    """May ``me`` (a worker's pid) enter with a test of ``kind``, given who is in and who waits?"""
    others = [k for pid, k in inside.items() if pid != me]
    ahead = [k for pid, k in waiting.items() if pid != me]
    if kind == ALONE:
        return not others and QUIET not in ahead  # the quiet ones go first, all side by side
    if kind == QUIET:
        return all(k == QUIET for k in others)
    return all(k == BUSY for k in others) and not any(k != BUSY for k in ahead)


class Room:
    def __init__(self, base: Path, workers: int = 1) -> None:
        self.lock, self.state = base.with_suffix(".lock"), base.with_suffix(".json")
        self.me = str(os.getpid())
        self.workers = workers  # the workers expected to look in (those with tests to run)

    def admits(self, kind: str, room: dict[str, Any], now: float) -> bool:
        """May this worker's test of ``kind`` enter ``room`` now? As :func:`fits`, and a busy one only
        once every worker has looked in (their first tests may read the machine) or :data:`GRACE` is over."""
        seen = room.setdefault("seen", [])
        if self.me not in seen:
            seen.append(self.me)
        opened = room.setdefault("opened", now)
        everyone = len(seen) >= self.workers or now - opened >= GRACE
        return fits(kind, self.me, room["in"], room["waiting"]) and (kind != BUSY or everyone)

    def _edit(self, change: Callable[[dict[str, Any]], bool]) -> bool:
        with open(self.lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when f closes
            try:
                room = json.loads(self.state.read_text())
            except (OSError, ValueError):
                room = {"in": {}, "waiting": {}}
            for part in ("in", "waiting"):
                room[part] = {pid: k for pid, k in room[part].items() if _alive(pid)}
            done = change(room)
            self.state.write_text(json.dumps(room))
            return done

    def enter(self, kind: str) -> None:
        def step(room: dict[str, Any]) -> bool:
            if self.admits(kind, room, time.time()):
                room["in"][self.me] = kind
                room["waiting"].pop(self.me, None)
                return True
            room["waiting"][self.me] = kind
            return False

        while not self._edit(step):
            time.sleep(POLL)

    def leave(self, next_kind: str | None) -> None:
        """Out of the room; waiting at once for the next test when it is not busy (keeping busy ones out)."""
        def step(room: dict[str, Any]) -> bool:
            room["in"].pop(self.me, None)
            if next_kind is not None and next_kind != BUSY:
                room["waiting"][self.me] = next_kind
            return True

        self._edit(step)


def first_shares(kinds: list[str], workers: int, early: Iterable[int] = ()) -> list[int]:
    """An order of the tests (indices into ``kinds``) that spreads the quiet ones over the heads of every
    worker's first share, so they run side by side at once, then the alone ones over the shares in turn, worker 0's
    first (they run one after another when the quiet ones are done, whichever worker holds them: the room admits
    one at a time and no busy test while one waits), then one early busy test per share. Work stealing's first
    share gives each worker a run of the collection: worker k a ``1/(W-k)`` part of what is left (another scheduler
    only runs them in another order).

    ``early``: busy tests (``@pytest.mark.early``) much longer than the rest, each the first busy test of a
    worker of its own (the last workers' first), so they run side by side as soon as the machine is the busy
    tests'. Before, the alone tests filled the first workers' shares and early tests past the other workers' count
    queued behind: the examples' tier's 10 alone tests took 2 of 6 shares, its fifth and sixth early tests began
    87 and 167 s into the busy phase, and the last ended the tier 120 s after the machine fell idle. Early tests
    beyond the workers' count (the shortest, when they come longest first) go second in the first workers' shares,
    behind the shortest of the others. The other busy tests keep the
    collection's order: the slow ones first (the longest first, as a scheduler minding the run's end would take
    them) put every load side by side, and mutants whose bug shows in timing went uncaught beside each other (CI:
    three of them in one run)."""
    early = list(early)
    first = set(early)
    quiet = [i for i, k in enumerate(kinds) if k == QUIET]
    alone = [i for i, k in enumerate(kinds) if k == ALONE]
    leading = [i for i in early if kinds[i] == BUSY]  # in the order given: the longest first
    busy = [i for i, k in enumerate(kinds) if k == BUSY and i not in first]
    if workers < 2:
        return quiet + alone + leading + busy
    sizes, left = [], len(kinds)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    shares: list[list[int]] = [quiet[k::workers] for k in range(workers)]

    def place(i: int, order: Iterable[int]) -> None:  # the first share in ``order`` with room, else the last one
        ks = list(order)
        shares[next((k for k in ks if len(shares[k]) < sizes[k]), ks[-1])].append(i)

    for n, i in enumerate(alone):  # in turn over the shares, worker 0's first
        place(i, [*range(n % workers, workers), *range(n % workers)])
    for n, i in enumerate(leading):  # one each, the last workers' first; past the workers' count, the first ones'
        if n < workers:
            start = workers - 1 - n
            place(i, [*range(start, -1, -1), *range(workers - 1, start, -1)])
        else:
            start = (n - workers) % workers
            place(i, [*range(start, workers), *range(start)])
    for k in range(workers):
        fill = max(0, sizes[k] - len(shares[k]))
        shares[k] += busy[:fill]
        del busy[:fill]
    return [i for share in shares for i in share] + busy


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True
