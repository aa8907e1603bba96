"""What a property that waits on real time says of its length, and the time limit it arms
(:class:`peakproof.pytest_plugin.Pace`): the figure before it starts is the model's, every later one
comes from what its units measured, and the harness's limit is never below what it said nor shortened.
A fake clock and a fake pytest-timeout: no timing here."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from peakproof import pytest_plugin
from peakproof.pytest_plugin import LIMIT_FACTOR, LIMIT_MARGIN, PRIOR_UNITS, Pace, hypothesis_small_examples
from peakproof.pytest_session import PropertiesSession, session_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timeout:
    """pytest-timeout's two hooks, recording what was armed."""

    def __init__(self) -> None:
        self.armed: list[float] = []

    def pytest_timeout_set_timer(self, item: Any, settings: Any) -> None:
        self.armed.append(settings.timeout)

    def pytest_timeout_cancel_timer(self, item: Any) -> None:
        pass


def item(timeout: float | None) -> Any:
    hook = Timeout() if timeout is not None else SimpleNamespace()
    options = {"timeout": timeout, "timeout_method": "signal"}
    config = SimpleNamespace(stash=pytest.Stash(), getoption=lambda name, default=None: options.get(name, default),
                             getini=lambda name: None,
                             pluginmanager=SimpleNamespace(hook=hook, getplugin=lambda name: None))
    node = SimpleNamespace(config=config, nodeid="properties/test_x.py::test_waits", get_closest_marker=lambda n: None)
    if timeout is not None:
        node.cancel_timeout = lambda: None
    return node


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(pytest_plugin.time, "monotonic", c)
    return c


def test_the_first_figure_is_the_model_s_and_every_later_one_what_the_run_measured(clock: Clock) -> None:
    it = item(None)
    pace = Pace(it, "tickets over HTTP", "4 examples x 20 steps", 4, 10.0)
    for took in (2.0, 2.0, 10.0, 3.0):
        clock.now += took
        pace.done()
    said = session_of(it.config).paces[it.nodeid]["said"]
    # 40 s modelled; nothing said until three examples were measured (half the units, three at least);
    # then 14 s so far and 1 to go at (3 x 10 + 14) / 6, the model counting as PRIOR_UNITS examples; after the
    # fourth, 17 s: within a quarter of that, not said again
    assert PRIOR_UNITS == 3 and said == [40.0, pytest.approx(14 + (30 + 14) / 6, abs=0.01)]


def test_hypothesis_s_small_first_examples_are_not_counted(clock: Clock) -> None:
    it = item(None)
    small = hypothesis_small_examples(12)  # the simplest, then one more whose later choices are the least
    pace = Pace(it, "notifications over HTTP", "12 examples", 12, 8.0, small=small)
    for n, took in enumerate((0.2, 0.4, 14.0, 14.0, 14.0, 14.0, 14.0), 1):  # the model stands for the rest
        clock.now += took
        counted = max(0, n - small)
        each = (3 * 8.0 + 14.0 * counted) / (3 + counted)
        assert pace.done() == pytest.approx((clock.now - 1000.0) + (12 - n) * each)
    clock.now += 14.0  # the sixth that counts: half the twelve
    pace.done()
    assert small == 2 and session_of(it.config).paces[it.nodeid]["said"] == [
        96.0, pytest.approx(84.6 + 4 * (3 * 8.0 + 84.0) / 9, abs=0.01)]


def test_more_units_than_planned_add_what_they_took_and_nothing_to_go(clock: Clock) -> None:
    pace = Pace(item(None), "x", "one wait", 1, 5.0, unit="wait")
    clock.now += 5.0
    assert pace.done() == 5.0
    clock.now += 5.0  # a replay of a failing run, say
    assert pace.done() == 10.0


def test_the_harness_s_limit_is_armed_above_what_is_said_and_is_never_shortened(clock: Clock) -> None:
    it = item(300.0)
    armed = it.config.pluginmanager.hook.armed
    pace = Pace(it, "notifications over HTTP", "10 examples", 10, 60.0, bound=100.0)
    # the longest the bounded waits could take, or three times the figure, and the margin; never under the ini's
    assert armed == [max(LIMIT_FACTOR * 600.0, 10 * 100.0) + LIMIT_MARGIN]
    clock.now += 5.0
    pace.done()  # far quicker than modelled: the limit stays where it was (never shortened)
    assert len(armed) == 1
    clock.now += 2000.0  # an example far slower than modelled: to go, 8 x 1002.5 s; re-armed above it
    pace.done()
    assert armed[-1] == LIMIT_FACTOR * 8 * (PRIOR_UNITS * 60.0 + 2005.0) / (PRIOR_UNITS + 2) + LIMIT_MARGIN
    assert session_of(it.config).paces[it.nodeid]["limit"] >= session_of(it.config).paces[it.nodeid]["said"][-1]


def test_a_short_wait_keeps_the_configured_limit_from_now_and_no_limit_arms_nothing(clock: Clock) -> None:
    it = item(300.0)
    Pace(it, "tickets over HTTP", "a hold paid after it lapsed", 1, 2.0, unit="wait")
    assert it.config.pluginmanager.hook.armed == [300.0]
    it = item(0.0)  # --timeout 0: pytest-timeout is off
    Pace(it, "tickets over HTTP", "a hold paid after it lapsed", 1, 2.0, unit="wait")
    assert it.config.pluginmanager.hook.armed == []


def test_the_session_lists_each_figure_and_what_the_call_took() -> None:
    session = PropertiesSession()
    session.paces["p::t"] = {"what": "x", "said": [40.0, 8.0], "took": None, "limit": 420.0}
    session.pytest_runtest_logreport(SimpleNamespace(when="call", nodeid="p::t", duration=9.5, outcome="passed"))
    lines: list[str] = []
    reporter = SimpleNamespace(section=lambda *a, **k: lines.append(a[0]), write_line=lines.append)
    config = SimpleNamespace(stash=pytest.Stash(), getoption=lambda *a, **k: None)
    session.pytest_terminal_summary(reporter, 0, config)  # type: ignore[arg-type]
    assert "  p::t: said about 40.0 s (then 8.0 s, from what it measured); took 9.5 s; the harness's limit 420 s" \
        in lines, lines
    merged = PropertiesSession()
    merged.merge(session.to_worker_output())  # a pytest-xdist worker's figures reach its controller
    assert merged.paces == session.paces


def test_a_wait_past_max_wait_is_not_planned_and_says_why(clock: Clock) -> None:
    """A hold answered with an ``expires_at`` ten years on: the property would wait for it (before, it said
    "about 5256000.0 min" and hung); past --max-wait it is not run, and says what to state instead."""
    it = item(None)
    it.config.option = SimpleNamespace(spec=None, max_wait=60.0)
    with pytest.raises(pytest.skip.Exception) as e:
        Pace(it, "tickets over HTTP", "a hold paid after it lapsed", 1, 315_360_000.0, unit="wait")
    assert str(e.value).startswith("past --max-wait (60 s)") and "state it" in str(e.value), str(e.value)
    assert it.nodeid not in session_of(it.config).paces or not session_of(it.config).paces[it.nodeid]["said"]
    Pace(it, "tickets over HTTP", "a hold of 30 s", 1, 30.0, unit="wait")  # within it: planned as before
