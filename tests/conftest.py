"""The harness's own tests say what they cost: a guard that fails a test which starts a server
or a child process without the marker that says so (markers declared in pyproject.toml).

* A server (a ``ServedTarget``, a uvicorn ``Server``, any socket that listens: asyncio's and
  the standard library's servers, a raw loopback server) needs ``@pytest.mark.http``.
* A child process needs ``http`` when it serves or drives load (its command runs ``locust``,
  ``peakproof``, a ``tests.support`` module or points at a ``--target-url``), and ``slow`` or
  ``http`` otherwise (an interpreter start and its imports take seconds).
* A test that uses the plugin's serving fixtures (``serve_tickets``, ``tickets_url``) needs
  ``http`` even when another test started the session's server first.

Tests run four at a time (``pytest -n 4``, pytest-xdist). A test whose verdict reads the machine
(a calibration, the tenancy meter, a test that accepts INCONCLUSIVE naming a neighbour) is marked
``alone`` (no other test runs beside it) or, when its run takes a few hundredths of a core, ``quiet``
(only other quiet tests beside it): :func:`pytest_runtest_protocol` and ``tests/support/room.py``, so the
neighbour it would measure is never the suite's busy tests. They are sorted first.

The guard is on for a test's setup (so module and session fixtures that start a server are
caught too, in whichever test first sets them up) and for its call; it patches a few
attributes around each phase and undoes them after, so it costs microseconds. It cannot see
what a test's threads start, nor a server bound by C code outside uvicorn (uvloop used
directly).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
import uvicorn

from peakproof.launch import ServedTarget
from tests.support.room import ALONE, BUSY, QUIET, Room, first_shares

# A FAIL's witness is replayed against its target for up to --replay-seconds (60 by default) before the run ends:
# the suite's many runs that must FAIL (mutants, broken stacks) would each spend it. Their children inherit 0 here
# (the witness found and shown, nothing replayed); the tests of the reproduction itself pass --replay-seconds.
os.environ.setdefault("PEAKPROOF_REPLAY_SECONDS", "0")

SERVING_FIXTURES = ("serve_tickets", "tickets_url")
SERVING_COMMANDS = ("locust", "peakproof")  # a command token (or its basename) that serves or drives load


def _marks(item: pytest.Item) -> set[str]:
    return {m.name for m in item.iter_markers()}


def _refuse(item: pytest.Item, what: str, need: str, *, pytrace: bool = True) -> None:
    __tracebackhide__ = True  # the traceback ends where the test started it
    pytest.fail(f"{item.nodeid} {what}: mark it {need} (pyproject.toml: http = starts a server on 127.0.0.1, "
                f"slow = takes more than a few seconds; the guard is in tests/conftest.py)", pytrace=pytrace)


def _tokens(args: Any) -> list[str]:
    """A child's command line as words, whether given as a list, a string or one path."""
    if isinstance(args, os.PathLike):
        return [os.fsdecode(args)]
    if isinstance(args, (str, bytes)):
        text = os.fsdecode(args)
        try:
            return shlex.split(text)
        except ValueError:
            return text.split()
    return [os.fsdecode(a) for a in args]


def _serves_or_loads(tokens: list[str]) -> bool:
    for token in tokens:
        base = token.rstrip("/").rsplit("/", 1)[-1]
        if (base in SERVING_COMMANDS or token.startswith("tests.support.") or token == "--target-url"
                or token.startswith("--target-url=")):
            return True
    return False


@contextmanager
def server_guard(item: pytest.Item) -> Iterator[None]:
    """While active, starting a server or a child process the item's markers do not allow fails it."""
    marks = _marks(item)
    if "http" in marks:
        yield
        return
    mp = pytest.MonkeyPatch()
    real_popen_init = subprocess.Popen.__init__

    def served_target_start(self: ServedTarget, *a: Any, **kw: Any) -> Any:
        __tracebackhide__ = True
        _refuse(item, f"starts a server (ServedTarget {self.case!r})", "@pytest.mark.http")

    def uvicorn_server(self: Any, *a: Any, **kw: Any) -> None:
        __tracebackhide__ = True
        _refuse(item, "starts a server (uvicorn.Server)", "@pytest.mark.http")

    def listen(self: socket.socket, *a: Any) -> None:
        __tracebackhide__ = True
        _refuse(item, f"starts a server (a socket listening on {self.getsockname()!r})", "@pytest.mark.http")

    def popen_init(self: subprocess.Popen, args: Any, *a: Any, **kw: Any) -> None:
        __tracebackhide__ = True
        tokens = _tokens(args)
        shown = " ".join(tokens)[:160]
        if _serves_or_loads(tokens):
            _refuse(item, f"starts a child process that serves or drives load ({shown})",
                    "@pytest.mark.http (and @pytest.mark.slow if it takes more than a few seconds)")
        if "slow" not in marks:
            _refuse(item, f"starts a child process ({shown})", "@pytest.mark.slow (or http)")
        real_popen_init(self, args, *a, **kw)

    try:
        mp.setattr(ServedTarget, "start", served_target_start)
        mp.setattr(uvicorn.Server, "__init__", uvicorn_server)
        mp.setattr(socket.socket, "listen", listen)
        mp.setattr(subprocess.Popen, "__init__", popen_init)
        yield
    finally:
        mp.undo()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    used = [f for f in SERVING_FIXTURES if f in getattr(item, "fixturenames", ())]
    if used and "http" not in _marks(item):
        _refuse(item, f"uses {', '.join(used)} (a server on 127.0.0.1)", "@pytest.mark.http", pytrace=False)
    with server_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    with server_guard(item):
        return (yield)


# -- tests that need the machine (or most of it) to themselves: tests/support/room.py ----------------------------

def _room(config: pytest.Config) -> Room | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one run
    # Only an xdist worker enters the room. A pytest a test starts (a fourth case's properties, a
    # pytester run) inherits the worker's environment, but its parent test is already in the room:
    # waiting behind an alone test that waits for that room would never end (it did, at -n 4)
    if not run or not hasattr(config, "workerinput"):
        return None  # one process, or a child of a test: nothing to wait for
    return Room(Path(tempfile.gettempdir()) / f"peakproof-tests-{run}")


def _kind(item: pytest.Item | None) -> str | None:
    if item is None:
        return None
    return ALONE if item.get_closest_marker("alone") else QUIET if item.get_closest_marker("quiet") else BUSY


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the alone tests first, then the quiet ones, each at the head of a worker's first share: under pytest -n
    # they then run before anything else starts (busy tests wait while one of them waits), alone ones one after
    # another, quiet ones side by side, instead of each waiting for the other workers' tests of the moment
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    order = first_shares([_kind(i) or BUSY for i in items], workers)
    items[:] = [items[i] for i in order]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # pytest -n's default hands each worker a fixed share of the first tests; the suite's run times differ
    # a hundredfold (0.01 s to 100 s), so one worker's share can end long after the others'. Work
    # stealing gives an idle worker tests still queued on a busy one: 493 s against 513 s for the
    # README's command. (Sorting the dearest tiers first was slower, 547 s: long runs side by side
    # contend for the two cores.) An explicit --dist stays.
    if getattr(config.option, "dist", None) == "load" and "--dist" not in " ".join(config.invocation_params.args):
        config.option.dist = "worksteal"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    room = _room(item.config)
    if room is None:
        return (yield)
    room.enter(_kind(item) or BUSY)
    try:
        return (yield)
    finally:
        room.leave(_kind(nextitem))


# -- what each test costs the machine: PEAKPROOF_TEST_CPU=1 lists the dearest tests by CPU (where the next minute
# of a CPU-bound suite is bought back; wall time alone does not tell a test that waits from one that computes)

def _cpu_now() -> float:
    import resource

    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    # the worker's own threads (in-process servers) and every descendant it waited for (a child's own waited
    # children are in its figure): a child still running when the test ends is not counted
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


_CPU0 = pytest.StashKey[float]()
_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if call.when == "setup":
        item.stash[_STARTED] = call.start
    elif call.when == "teardown" and _STARTED in item.stash:  # the test's span, for the phases' lengths
        report.user_properties.append(("span", (item.stash[_STARTED], call.stop, _kind(item) or BUSY)))
    if os.environ.get("PEAKPROOF_TEST_CPU"):
        if call.when == "setup":
            item.stash[_CPU0] = _cpu_now() - call.duration  # (the setup's own CPU is in: close enough)
        elif call.when == "teardown" and _CPU0 in item.stash:
            report.user_properties.append(("cpu_s", _cpu_now() - item.stash[_CPU0]))
    return report


TIERS = ("tests/unit", "tests/served", "tests/e2e", "tests/quality", "tests/stacks", "properties")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """What each tier cost, the tests' own time (setup, call, teardown) summed (with -n 4 four run at once), and
    whether it is green (a failed setup, call or teardown counted)."""
    spent: dict[str, float] = {}
    count: dict[str, int] = {}
    failed: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            nodeid, when = getattr(r, "nodeid", None), getattr(r, "when", None)
            if not nodeid or when not in ("setup", "call", "teardown"):
                continue
            tier = next((t for t in TIERS if nodeid.startswith(t + "/")), "other")
            spent[tier] = spent.get(tier, 0.0) + float(getattr(r, "duration", 0.0) or 0.0)
            count[tier] = count.get(tier, 0) + (when == "call")
            failed[tier] = failed.get(tier, 0) + bool(getattr(r, "failed", False))
    cpu = sorted(((dict(r.user_properties)["cpu_s"], r.nodeid) for reports in terminalreporter.stats.values()
                  for r in reports if getattr(r, "when", None) == "teardown"
                  and "cpu_s" in dict(getattr(r, "user_properties", None) or [])), reverse=True)
    if cpu:
        terminalreporter.section(f"CPU per test (PEAKPROOF_TEST_CPU): {sum(c for c, _ in cpu):.0f} s in all; the dearest")
        for c, nodeid in cpu[:40]:
            terminalreporter.write_line(f"  {c:7.1f} s  {nodeid}")
    spans = [dict(r.user_properties)["span"] for reports in terminalreporter.stats.values() for r in reports
             if getattr(r, "when", None) == "teardown" and "span" in dict(getattr(r, "user_properties", None) or [])]
    if spans:
        # when each kind of test ran, from the first's start: the alone ones one after another, the quiet ones
        # side by side, the busy ones four at a time (tests/support/room.py)
        t0 = min(a for a, _, _ in spans)
        terminalreporter.section("phases: when each kind of test ran (s from the first test's start)")
        for kind in (ALONE, QUIET, BUSY):
            mine = [(a, b) for a, b, k in spans if k == kind]
            if mine:
                terminalreporter.write_line(f"  {kind:6} {len(mine):4} tests from {min(a for a, _ in mine) - t0:7.1f} to "
                                            f"{max(b for _, b in mine) - t0:7.1f}, their own time {sum(b - a for a, b in mine):8.1f} s")
    if spent:
        terminalreporter.section("tiers: tests' own time, summed (tests/conftest.py)")
        for tier in (*TIERS, "other"):
            if tier in spent:
                outcome = f"{failed[tier]} failed" if failed.get(tier) else "green"
                terminalreporter.write_line(f"  {tier:15} {count.get(tier, 0):4} tests {spent[tier]:8.1f} s  {outcome}")
