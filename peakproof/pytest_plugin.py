"""The pytest side of peakproof: its options, the fixtures that hand a property its target
(one mechanism for every registered case), and the properties' result.

Loaded by the project's ``conftest.py`` (``pytest_plugins``). What a session learns (chances,
capabilities missing or waived, the rules stated, the contract's results, what was undecided) is
kept on one :class:`PropertiesSession`, a plugin object in ``config.stash`` (:func:`session_of`),
never in module globals: a pytester session inside another keeps its own. The options are
:mod:`peakproof.options`' ``pytest`` surface; ``--spec FILE`` (what ``peakproof run``
passes) reads them all from a run spec instead. A fixture ``<case>_target`` exists for each
case of the registry. At the end the plugin writes the properties' :class:`StageResult`
(``--result FILE``): its outcome is judged here, from pytest's own outcomes, never scraped
from its output.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

from .cases import all_cases, get_case, run_of
from .checks import pop_tally, push_tally
from .history import History
from .launch import ServedTarget
from .options import PYTEST, add_options
from .pytest_session import (NOT_EXERCISED_EXIT, PropertiesSession, max_wait, properties_result, session_of,  # noqa: F401
                             waived_checks)
from .run import Run
from .spec import RunFacts, RunSpec


@dataclass
class Target:
    """Where one case's properties run: its in-process reference (virtual time) or a URL.

    Every property machine gets its drivers from here (:meth:`new_driver`), whatever the
    case: the same options (``--target-url``, ``--admin-token``, ``--provider-url``,
    ``--policy``, ``--driver``) mean the same thing for each.
    """

    case: str
    url: str | None = None
    policy: str | None = None  # of the in-process reference; None: the case's default
    admin_token: str | None = None
    provider_url: str | None = None
    driver_spec: str | None = None  # module:Class of the user's own driver (built with base_url=url)
    rules: Any = None  # what the target states it does (the case's Case.rules), which the checks judge by
    in_process_options: dict[str, Any] = field(default_factory=dict)  # e.g. core_factory: a broken core
    spec: RunSpec | None = None  # the run's spec: the driver, its timeout, --without, the case's own options
    # where what the properties could not decide is recorded (the pytest session's); None: nowhere
    session: "PropertiesSession | None" = field(default=None, repr=False, compare=False)
    # the run record the session built once (its case, its driver class); None: built when first asked
    run_record: Run | None = field(default=None, repr=False, compare=False)

    @property
    def run(self) -> Run:
        """This target's run record: the session's, built at its start; a Target a test module builds by
        hand is its own entry point, and gets one built from its options when first asked."""
        if self.run_record is None:
            self.run_record = run_of(self.run_spec())
        return self.run_record

    @property
    def in_process(self) -> bool:
        return self.url is None

    def left_out(self, *checks: str) -> None:
        """Skip a property that exists to put ``checks`` to the test when the product's stated design leaves
        every one of them out (peakproof.design): it would wait, or send, for nothing it judges."""
        reasons = [self.run.design().reason(c) for c in checks]
        if checks and all(reasons):
            pytest.skip(f"not checked: {'; '.join(r.removeprefix('not checked: ') for r in reasons if r)}")

    def new_driver(self, history: History | None = None, **in_process_options: Any) -> Any:
        """A fresh driver: in process, a new reference core (``in_process_options`` go to it);
        over a URL, a driver of that URL recording into ``history``."""
        if self.in_process:
            options = {**self.in_process_options, **in_process_options}
            if self.policy:
                options.setdefault("policy", self.policy)
            assert self.run.case.drivers is not None  # a registered case's
            return self.run.case.drivers.in_process(history=history, **options)
        driver = self.run.with_spec(self.run_spec()).build_driver(history=history)
        if self.session is not None:  # a property that fails leaves its histories to be replayed (peakproof.replay)
            self.session.note_history(self, driver.history)
        return driver

    def run_spec(self) -> RunSpec:
        """The spec a driver of this URL is built from (the session's, else one from the target's options)."""
        spec = self.spec or RunSpec(case=self.case, target_url=self.url, admin_token=self.admin_token,
                                    driver=self.driver_spec if self.url else None,
                                    case_options={"provider_url": self.provider_url} if self.provider_url else {})
        return spec.with_options(target_url=self.url)

    @property
    def without(self) -> tuple[str, ...]:
        return self.spec.without if self.spec else ()

    def server_errors(self, ops: Any) -> Any:
        """``no_server_errors`` over ``ops`` (the run's ``--slo errors:rate<=N%``, else none allowed)."""
        from .slo import no_server_errors, properties_error_budget

        return no_server_errors(ops, properties_error_budget(self.spec.slo if self.spec else ()))

    def offers(self, driver: Any, capability: str) -> bool:
        """Does ``driver`` offer the case's ``capability`` (and the user did not disown it)?"""
        from .capabilities import offers

        return capability not in self.without and offers(driver, self.run.case.capability(capability), self.spec)

    def require(self, driver: Any, capability: str, op: Any = None) -> None:
        """Skip the property, recording why, when ``driver`` lacks ``capability`` (or ``op``, its
        call, found no route): the properties' result is then INCONCLUSIVE naming it, or, waived
        with ``--without``, a listed waiver."""
        from .capabilities import no_route

        cap = self.run.case.capability(capability)
        if capability in self.without:
            self._session.waived.add(capability)
            pytest.skip(f"waived: --without {capability} (the target has no {cap.what})")
        if not self.offers(driver, capability) or (op is not None and no_route(op)):
            self._session.lacking.add(capability)
            pytest.skip(cap.sentence(f"the driver {self.driver_spec or 'of the contract'}"))

    def off_contract(self, op: Any, what: str = "") -> None:
        """Skip (recorded: INCONCLUSIVE) when ``op`` found no route: the target speaks another API."""
        from .capabilities import no_route
        from .errors import OffContract

        if op is not None and no_route(op):
            message = str(OffContract(self.case, what or op.f, op.value, self.driver_spec))
            self._session.speaks_another_api(message)
            pytest.skip(message)

    @property
    def _session(self) -> "PropertiesSession":
        return self.session if self.session is not None else PropertiesSession()  # nobody reads a private one

    def describe(self) -> str:
        return self.url or f"in-process reference target{f' (policy {self.policy})' if self.policy else ''}"

    @classmethod
    def from_spec(cls, spec: RunSpec, session: "PropertiesSession | None" = None,
                  facts: RunFacts | None = None) -> "Target":
        """The session's target of ``spec``'s case, its run record built here once, with the ``facts`` its run
        passed (a bad ``--driver`` is the user's error, said before any property runs; in process a
        ``--driver`` drives nothing)."""
        from .errors import UsageError

        def driving(sp: RunSpec) -> RunSpec:
            return sp if sp.target_url else sp.with_options(driver=None)

        try:
            stated = driving(spec)  # the rules as the user stated them (the properties' own time, not a load's)
            spec = get_case(spec.case).resolved(spec)
            run = run_of(driving(spec), facts)
            rules = run.with_spec(stated).rules()
        except (ValueError, UsageError) as e:
            raise pytest.UsageError(str(e)) from None
        if spec.target_url and rules is not None and session is not None:  # the rules a URL verdict holds under
            session.rules[run.case.name] = dict(rules.describe())
        try:
            design = run.design()
        except UsageError as e:
            raise pytest.UsageError(str(e)) from None
        if session is not None:  # every judgement of the session leaves out what it makes meaningless (and a
            session.chances.designs[run.case.name] = design  # FAIL it would explain, unstated, says which)
            if design.stated:
                session.design[run.case.name] = design.lines()
        return cls(spec.case, spec.target_url, spec.policy, spec.admin_token, spec.opt("provider_url"), spec.driver,
                   rules, spec=spec, session=session, run_record=run)


def announce(config: pytest.Config, text: str) -> None:
    """A line on the terminal now, whatever the capture (a real-time property must show life)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    tr = config.pluginmanager.getplugin("terminalreporter")
    if capman is None or tr is None:
        print(text)
        return
    with capman.global_and_fixture_disabled():
        tr.write_line(text)


def say_seconds(seconds: float) -> str:
    """A duration as the announcements say it: seconds up to a minute and a half, then minutes."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


# The harness's own time limit for a property that announced its length: this many times what is still to go,
# plus a margin (judging, a slow machine), and never below what its bounded waits could take.
LIMIT_FACTOR, LIMIT_MARGIN = 3.0, 120.0


def time_limit(item: pytest.Item) -> float:
    """pytest-timeout's limit for ``item`` (s; 0 when it is off or not installed)."""
    hook = item.config.pluginmanager.hook
    if not hasattr(hook, "pytest_timeout_set_timer"):
        return 0.0
    marker = item.get_closest_marker("timeout")
    current = (marker.args[0] if marker and marker.args else None) or item.config.getoption("timeout", None) \
        or item.config.getini("timeout")
    try:
        return max(0.0, float(current or 0))
    except (TypeError, ValueError):
        return 0.0


# How much the modelled figure weighs against the measured units, in units: a few examples of a machine vary
# threefold (Hypothesis turns rules on and off per example), so one measured example does not overrule the model.
PRIOR_UNITS = 3


def hypothesis_small_examples(max_examples: int) -> int:
    """How many of a run's first examples Hypothesis keeps small: its simplest (every choice the least), then
    up to a tenth of ``max_examples`` (at most 50) whose later choices are all the least. They cost a fraction
    of the rest (a notifications machine: 0.2 and 0.4 s, then 3 to 15 s), so they tell nothing of the rest."""
    return 1 + min(max_examples // 10, 50)


class Pace:
    """How long a property that waits on real time takes, said on the terminal and kept to.

    Before it starts: ``units`` (examples, or one wait) of ``per_unit`` s each, as modelled from what the
    preflight measured (the target's round trip, a median of warm requests) and the waits the target's
    stated windows make, typical ones, never the worst. After each unit (:meth:`done`) the figure comes
    from what the run measured: the time so far, plus the units still to go at the mean of the measured
    ones (the first ``small`` aside: Hypothesis's small examples, :func:`hypothesis_small_examples`), the
    model counting as ``PRIOR_UNITS`` of them; said again once half the units were measured, and after
    that whenever it moves by a quarter or more. Each time the harness's own time limit (pytest-timeout) is re-armed
    above it: ``LIMIT_FACTOR`` times what is still to go plus ``LIMIT_MARGIN``, and never below ``bound``
    a unit (the longest its bounded waits can take), so no property is cut by a limit the harness set
    itself. The session keeps every figure said and what the test took (:class:`PropertiesSession`
    ``paces``), and lists them at the end. ``tail``: what the test waits once its units are done (a property
    whose examples leave their last rounds to finish in the background waits for the last of them), modelled,
    added to every figure."""

    def __init__(self, item: pytest.Item, what: str, how: str, units: int, per_unit: float, *,
                 unit: str = "example", bound: float = 0.0, small: int = 0, tail: float = 0.0) -> None:
        self.item, self.what, self.unit, self.small, self.tail = item, what, unit, small, max(0.0, tail)
        self.units, self.per_unit, self.bound = max(1, units), max(0.0, per_unit), max(bound, per_unit)
        # said again only once half the units (three at least) were measured: Hypothesis's early examples are
        # the cheap ones (a tickets machine's third to sixth took 0.75 s each, the rest 3 s), so a figure from a
        # third of them said 0.50 of what the run took, from the first beyond the small ones 0.38
        self.enough = max(3, self.units // 2)
        self.started = self.last = time.monotonic()
        self.took: list[float] = []
        self.deadline: float | None = None  # when the limit this pace armed fires (monotonic), None: none armed
        self.record = session_of(item.config).paces.setdefault(item.nodeid, {"what": what, "said": [], "took": None,
                                                                             "limit": None})
        self.said = self.units * self.per_unit + self.tail
        longest = max_wait(item.config)
        if self.per_unit > longest:  # a wait that long is the product's design or a hang, never a test: said
            pytest.skip(f"past --max-wait ({say_seconds(longest)}): {what}: {how}: about {say_seconds(self.per_unit)} "
                        f"a {unit}: not run, its checks not decided by it. If your product waits that long by design, "
                        f"state it (peakproof run --help lists the case's design statements), or raise --max-wait")
        limit = self._arm(self.said, self.units)
        self._say(f"{how}: about {say_seconds(self.said)}" + (f" (the harness's time limit for it: "
                                                              f"{say_seconds(limit)})" if limit else ""), self.said)

    def done(self) -> float:
        """One unit ended: fold in its measured duration; returns the figure now (s, the whole test's)."""
        now = time.monotonic()
        self.took.append(now - self.last)
        self.last = now
        left = max(0, self.units - len(self.took))
        counted = self.took[self.small:]
        each = (PRIOR_UNITS * self.per_unit + sum(counted)) / (PRIOR_UNITS + len(counted))
        to_go = left * each + self.tail
        total = (now - self.started) + to_go
        self._arm(to_go, left)
        moved = abs(total - self.said) > 0.25 * self.said
        if len(counted) >= self.enough and (len(counted) == self.enough or moved):
            n, mean = len(self.took), sum(counted) / len(counted)
            aside = f", the first {self.small} aside: Hypothesis's simplest" if self.small else ""
            self._say(f"after {n} of {self.units} {self.unit}s ({mean:.1f} s each, measured{aside}): about "
                      f"{say_seconds(total)} in all, {say_seconds(to_go)} to go", total)
        return total

    def _say(self, text: str, seconds: float) -> None:
        self.said = seconds
        self.record["said"].append(round(seconds, 2))
        announce(self.item.config, f"peakproof: {self.what}: {text}")

    def _arm(self, to_go: float, units_left: int) -> float | None:
        """Re-arm pytest-timeout so that it fires no sooner than what is still to go allows; returns the limit
        from now when one is on (s), None when none is."""
        configured = time_limit(self.item)
        if configured <= 0 or not hasattr(self.item, "cancel_timeout"):
            return None
        now = time.monotonic()
        need = max(LIMIT_FACTOR * to_go, units_left * self.bound) + LIMIT_MARGIN
        if self.deadline is None:  # the first: from now, and never shorter than the configured limit
            need = max(need, configured)
        elif now + need <= self.deadline:
            return self.deadline - now
        from pytest_timeout import Settings  # the plugin's own record of a timer's settings

        method = self.item.config.getoption("timeout_method", None) or self.item.config.getini("timeout_method") \
            or "signal"
        hook = self.item.config.pluginmanager.hook
        hook.pytest_timeout_cancel_timer(item=self.item)
        hook.pytest_timeout_set_timer(item=self.item, settings=Settings(need, method, False, False))
        self.deadline = now + need
        self.record["limit"] = round(need + (now - self.started), 1)
        return need


# pytest-selenium owns --driver in every pytest session it is installed in (its webdriver, dest "driver"):
# two plugins adding one flag stop pytest before it starts, whichever loads second. The driver is always
# --peakproof-driver here, kept under a dest of its own; --driver is added too unless another plugin has
# it or pytest-selenium is installed (it may load after this one).
DRIVER_DEST = "peakproof_driver"


def _driver_flag_is_free() -> bool:
    import importlib.util

    return importlib.util.find_spec("pytest_selenium") is None


def pytest_addoption(parser: pytest.Parser) -> None:
    from .cases import all_options
    from .options import for_surface

    group = parser.getgroup("peakproof")
    options = for_surface(all_options(), PYTEST)
    add_options(group, PYTEST, [o for o in options if o.name != "driver"])
    driver = next(o for o in options if o.name == "driver")
    kwargs = {**driver.kwargs(), "dest": DRIVER_DEST}
    kwargs["help"] += " (also --driver, unless another plugin such as pytest-selenium has that flag)"
    if _driver_flag_is_free():
        try:
            group.addoption("--peakproof-driver", "--driver", **kwargs)
            return
        except (ValueError, argparse.ArgumentError):  # a plugin loaded before this one has --driver (pytest
            pass  # raises the first for a flag of the same group, argparse the second for another group's)
    group.addoption("--peakproof-driver", **kwargs)


def option_value(config: pytest.Config, name: str) -> Any:
    """The value of the peakproof option ``name`` (its spec field) on pytest's command line."""
    return getattr(config.option, DRIVER_DEST if name == "driver" else name, None)


def spec_for(case: str, config: pytest.Config) -> RunSpec:
    """The case's spec: ``--spec`` as written, or the command line's options."""
    path = config.getoption("--spec")
    if path:
        spec = RunSpec.load(path)
        if spec.case != case:
            pytest.skip(f"--spec {path} is a run of the {spec.case} case")
        return spec
    return get_case(case).spec_from(lambda name: option_value(config, name))


def target_url(config: pytest.Config) -> str | None:
    path = config.getoption("--spec")
    return RunSpec.load(path).target_url if path else config.getoption("--target-url")


def target_from_options(case: str, config: pytest.Config) -> Target:
    """The case's :class:`Target` from the command line; skips when the URL serves another case."""
    spec = spec_for(case, config)
    url = spec.target_url
    if url:
        path, own = urlsplit(url).path.rstrip("/"), get_case(case).path
        # a URL of another case's path (unless it is this one's too: a case copied from another serves its reference)
        other = [c.name for c in all_cases().values() if c.name != case and c.path and path.endswith(c.path)
                 and not (own and path.endswith(own))]
        if other:
            pytest.skip(f"--target-url {url} serves the {other[0]} case; {case} needs a URL ending in "
                        f"{get_case(case).path} (or one with no case path)")
    return Target.from_spec(spec, session_of(config), RunFacts.load(config.getoption("--spec")))


def _target_fixture(case: str) -> Callable[..., Target]:
    def fixture(request: pytest.FixtureRequest) -> Target:
        return target_from_options(case, request.config)

    fixture.__doc__ = f"The {case} case's target: its in-process reference, or --target-url."
    return pytest.fixture(scope="session", name=f"{case}_target")(fixture)


for _name in all_cases():  # one fixture per registered case: <case>_target
    globals()[f"{_name}_target"] = _target_fixture(_name)


@pytest.fixture
def in_process_only(request: pytest.FixtureRequest) -> None:
    """For properties that decide what the target cannot be told over HTTP (provider answers,
    interleavings, partial fan-out): skipped with ``--target-url``, where their URL twins run."""
    if target_url(request.config):
        pytest.skip("an in-process property (it controls the target's insides); with --target-url its "
                    "over-HTTP counterpart runs instead")


@pytest.fixture(scope="session")
def tickets_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL that serves the tickets contract: --target-url, or the reference server started here."""
    url = target_url(request.config)
    if url:
        yield url
        return
    with ServedTarget(get_case("tickets"), policy=request.config.getoption("--policy")) as served:
        yield served.url


@pytest.fixture
def serve_tickets() -> Iterator[Callable[..., ServedTarget]]:
    """Start reference servers with chosen options; all are stopped after the test."""
    started: list[ServedTarget] = []

    def start(**options: Any) -> ServedTarget:
        t = ServedTarget(get_case("tickets"), **options).start()
        started.append(t)
        return t

    yield start
    for t in started:
        t.__exit__(None, None, None)


def contract_for(case: str, config: pytest.Config, work: Path) -> Any:
    """Run the case's contract stage (Schemathesis) against this session's target; record the result.
    Test cases an operation for fuzzing and the stateful chains: 40 (the issue's own ``st run
    --max-examples 40``; the coverage phase tries every boundary whatever the number), 200 under the
    thorough profile. Derandomized profiles (ci) use a fixed seed, so a CI run is reproducible."""
    from hypothesis import settings

    from .contract import contract_stage

    current = settings()
    seed = 20261202 if current.derandomize else None
    examples = 200 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 40
    result = contract_stage(get_case(case), spec_for(case, config), work, max_examples=examples, seed=seed)
    session_of(config).contracts.append(result)
    return result


def assert_contract_kept(result: Any) -> None:
    """FAIL on a finding; skip, saying why, when the stage was skipped; the session exits 6 when
    Schemathesis could not test (an error, no test case)."""
    if result.outcome == "FAIL":
        pytest.fail(result.report(), pytrace=False)
    if result.skipped:
        pytest.skip(result.headline())


def _header(config: pytest.Config) -> str | None:
    """What the session runs against, and under which profile; None for someone else's tests (peakproof
    installed in their environment: not ours to head)."""
    from .profiles import loaded

    url = target_url(config)
    if url is None and loaded() is None:
        return None
    where = url or f"in-process reference target (policy {config.getoption('--policy') or 'the case default'})"
    profile = loaded()
    if profile is None:  # loaded when the properties are collected: name the one HYPOTHESIS_PROFILE asks for
        import os

        profile = f"{os.environ.get('HYPOTHESIS_PROFILE', 'dev')} (HYPOTHESIS_PROFILE; loaded with the properties)"
    return f"peakproof: target {where}; hypothesis profile {profile}"


def pytest_report_header(config: pytest.Config) -> str | None:
    line = _header(config)
    session_of(config).headed = line is not None
    return line


def pytest_collection_finish(session: pytest.Session) -> None:
    # pytest --pyargs peakproof.properties...: the properties' conftest (their profile) loads while collecting,
    # after the header: say it once they are collected
    line = None if session_of(session.config).headed else _header(session.config)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None and session.items:
        reporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    # the properties' own marker, declared where they ship (a team's repository has no ini naming it)
    config.addinivalue_line("markers", "http: starts a reference server on 127.0.0.1 or calls --target-url")
    session = session_of(config)
    config.pluginmanager.register(session, "peakproof-properties-session")
    push_tally(session.chances)  # judgements made in this session are tallied on it


def pytest_unconfigure(config: pytest.Config) -> None:
    pop_tally(session_of(config).chances)
