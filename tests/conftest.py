"""The harness's own tests: the folder is the cost (``tests/unit`` runs in this process, no socket and no child
process, guarded by its own conftest; ``tests/served``, ``tests/e2e``, ``tests/quality`` and ``tests/stacks``
serve, start processes and run loads, dearer each), and no marker selects among them.

Tests run six at a time (``pytest -n 6``, pytest-xdist). A test whose verdict reads the machine
(a calibration, the tenancy meter, a test that skips when a neighbour left its run undecided) is marked
``alone`` (no other test runs beside it) or, when its run takes a few hundredths of a core, ``quiet``
(only other quiet tests beside it): :func:`pytest_runtest_protocol` and ``tests/support/room.py``, so the
neighbour it would measure is never the suite's busy tests. They are sorted first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support import skips
from tests.support.room import ALONE, BUSY, QUIET, Room, first_shares

# A FAIL's witness is replayed against its target for up to --replay-seconds (60 by default) before the run ends:
# the suite's many runs that must FAIL (mutants, broken stacks) would each spend it. Their children inherit 0 here
# (the witness found and shown, nothing replayed); the tests of the reproduction itself pass --replay-seconds.
os.environ.setdefault("PEAKPROOF_REPLAY_SECONDS", "0")

# -- tests that need the machine (or most of it) to themselves: tests/support/room.py ----------------------------

def _room(config: pytest.Config, tests: int) -> Room | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one run
    # Only an xdist worker enters the room. A pytest a test starts (a fourth case's properties, a
    # pytester run) inherits the worker's environment, but its parent test is already in the room:
    # waiting behind an alone test that waits for that room would never end (it did, at -n 4)
    if not run or not hasattr(config, "workerinput"):
        return None  # one process, or a child of a test: nothing to wait for
    # every worker gets a first share when there are as many tests as workers (pytest-xdist): each looks in
    workers = min(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1), tests)
    return Room(Path(tempfile.gettempdir()) / f"peakproof-tests-{run}", workers)


def _kind(item: pytest.Item | None) -> str | None:
    if item is None:
        return None
    return ALONE if item.get_closest_marker("alone") else QUIET if item.get_closest_marker("quiet") else BUSY


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the alone tests first, then the quiet ones, each at the head of a worker's first share: under pytest -n
    # they then run before anything else starts (busy tests wait while one of them waits), alone ones one after
    # another, quiet ones side by side, instead of each waiting for the other workers' tests of the moment
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    early = [(n, i.get_closest_marker("early")) for n, i in enumerate(items)]
    longest_first = sorted(((n, m.args[0] if m.args else 0) for n, m in early if m), key=lambda e: -e[1])
    order = first_shares([_kind(i) or BUSY for i in items], workers, [n for n, _ in longest_first])
    items[:] = [items[i] for i in order]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _keep_skips(config)
    # pytest -n's default hands each worker a fixed share of the first tests; the suite's run times differ
    # a hundredfold (0.01 s to 100 s), so one worker's share can end long after the others'. Work
    # stealing gives an idle worker tests still queued on a busy one: 493 s against 513 s for the
    # README's command. (Sorting the dearest tiers first was slower, 547 s: long runs side by side
    # contend for the two cores.) An explicit --dist stays.
    if getattr(config.option, "dist", None) == "load" and "--dist" not in " ".join(config.invocation_params.args):
        config.option.dist = "worksteal"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    room = _room(item.config, len(item.session.items))
    if room is None:
        if os.environ.get("PEAKPROOF_TEST_CPU"):
            item.stash[_CPU0] = _cpu_now()
        return (yield)
    room.enter(_kind(item) or BUSY)
    try:
        if os.environ.get("PEAKPROOF_TEST_CPU"):
            item.stash[_CPU0] = _cpu_now()  # once in the room, before the setup: a fixture's run is the test's
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
        # from before the setup (pytest_runtest_protocol): the setup's wall time taken for its CPU counted a
        # fixture that waits 78 s on real time (a URL property run) as 78 s of CPU, three times what it took
        if call.when == "teardown" and _CPU0 in item.stash:
            report.user_properties.append(("cpu_s", _cpu_now() - item.stash[_CPU0]))
    return report


class FailureKeeper:
    """Each failed test's whole report (its traceback, its output, the run's excerpt), one file per test and phase,
    in ``$PEAKPROOF_FAILURES_DIR``: a runner that keeps only the last lines of the output (a quickstart check, a CI
    log cut short) loses why a test failed on a busy machine, where it may not fail again. Registered in the session
    a user or CI started, where every report arrives (under pytest -n, the controller)."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        import re
        import time

        self.folder.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", report.nodeid)[-180:]
        sections = "".join(f"\n----- {title} -----\n{text}" for title, text in report.sections)
        (self.folder / f"{name}.{report.when}.txt").write_text(
            f"{report.nodeid} ({report.when}) failed at {time.strftime('%Y-%m-%d %H:%M:%S')}, after "
            f"{report.duration:.1f} s\n\n{report.longreprtext}\n{sections}", encoding="utf-8")


TIERS = ("tests/unit", "tests/served", "tests/e2e", "tests/quality", "tests/stacks", "properties")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """What each tier cost, the tests' own time (setup, call, teardown) summed (with -n 6 six run at once), and
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
        # side by side, the busy ones six at a time (tests/support/room.py)
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
    _summarize_skips(terminalreporter, config)


# -- every skip has a reason class (tests/support/skips.py): kept where every test's report arrives (under pytest -n,
# the controller), counted at the end, written to PEAKPROOF_SKIP_RECORD for CI's gate (.ci/run)

_SKIPS = pytest.StashKey[skips.SessionSkips]()


def _keep_skips(config: pytest.Config) -> None:
    # the session a user or CI started: not an xdist worker (its controller gets its reports), nor a pytest a
    # test started (the fourth case's properties: it inherits PEAKPROOF_SKIP_RECORD, and would write over it)
    if hasattr(config, "workerinput") or "PYTEST_CURRENT_TEST" in os.environ:
        return
    config.stash[_SKIPS] = skips.SessionSkips(os.environ.get("PEAKPROOF_SKIP_RECORD") or None)
    config.pluginmanager.register(config.stash[_SKIPS], "peakproof-skips")
    if os.environ.get("PEAKPROOF_FAILURES_DIR"):
        config.pluginmanager.register(FailureKeeper(os.environ["PEAKPROOF_FAILURES_DIR"]), "peakproof-failures")


def _summarize_skips(terminalreporter: Any, config: pytest.Config) -> None:
    """The skips per class, and each skip of a test that must decide or of no class."""
    kept = config.stash.get(_SKIPS, None)
    if kept is None:
        return
    terminalreporter.section("skips by reason (tests/support/skips.py)")
    for line in kept.summary():
        terminalreporter.write_line(line)
