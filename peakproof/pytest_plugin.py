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

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

from .cases import all_cases, get_case
from .checks import ChanceTally, pop_tally, push_tally
from .driver import build_driver
from .history import History
from .launch import ServedTarget
from .options import PYTEST, add_options
from .spec import RunSpec, StageResult


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

    @property
    def in_process(self) -> bool:
        return self.url is None

    def new_driver(self, history: History | None = None, **in_process_options: Any) -> Any:
        """A fresh driver: in process, a new reference core (``in_process_options`` go to it);
        over a URL, a driver of that URL recording into ``history``."""
        module = get_case(self.case).module()
        if self.in_process:
            options = {**self.in_process_options, **in_process_options}
            if self.policy:
                options.setdefault("policy", self.policy)
            return module.IN_PROCESS(history=history, **options)
        spec = self.spec or RunSpec(case=self.case, target_url=self.url, admin_token=self.admin_token,
                                    driver=self.driver_spec,
                                    case_options={"provider_url": self.provider_url} if self.provider_url else {})
        return build_driver(spec.with_options(target_url=self.url), history=history)

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

        return capability not in self.without and offers(driver, get_case(self.case).capability(capability),
                                                         self.spec)

    def require(self, driver: Any, capability: str, op: Any = None) -> None:
        """Skip the property, recording why, when ``driver`` lacks ``capability`` (or ``op``, its
        call, found no route): the properties' result is then INCONCLUSIVE naming it, or, waived
        with ``--without``, a listed waiver."""
        from .capabilities import no_route

        cap = get_case(self.case).capability(capability)
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
            self._session.off_contract.append(message)
            pytest.skip(message)

    @property
    def _session(self) -> "PropertiesSession":
        return self.session if self.session is not None else PropertiesSession()  # nobody reads a private one

    def describe(self) -> str:
        return self.url or f"in-process reference target{f' (policy {self.policy})' if self.policy else ''}"

    @classmethod
    def from_spec(cls, spec: RunSpec, session: "PropertiesSession | None" = None) -> "Target":
        case = get_case(spec.case)
        try:
            rules = case.rules(spec) if case.rules else None
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        if spec.target_url and rules is not None and session is not None:  # the rules a URL verdict holds under
            session.rules[case.name] = dict(rules.describe())
        if spec.driver and spec.target_url:
            from .driver import driver_class
            from .errors import UsageError

            try:  # a bad --driver is the user's error, said once, before any property runs
                driver_class(spec.driver, case.module().PROTOCOL)
            except UsageError as e:
                raise pytest.UsageError(str(e)) from None
        from .errors import UsageError

        try:
            spec = case.resolved(spec)
        except (ValueError, UsageError) as e:
            raise pytest.UsageError(str(e)) from None
        return cls(spec.case, spec.target_url, spec.policy, spec.admin_token, spec.opt("provider_url"), spec.driver,
                   rules, spec=spec, session=session)


def announce(config: pytest.Config, text: str) -> None:
    """A line on the terminal now, whatever the capture (a real-time property must show life)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    tr = config.pluginmanager.getplugin("terminalreporter")
    if capman is None or tr is None:
        print(text)
        return
    with capman.global_and_fixture_disabled():
        tr.write_line(text)


def pytest_addoption(parser: pytest.Parser) -> None:
    from .cases import all_options

    add_options(parser.getgroup("peakproof"), PYTEST, all_options())


def spec_for(case: str, config: pytest.Config) -> RunSpec:
    """The case's spec: ``--spec`` as written, or the command line's options."""
    path = config.getoption("--spec")
    if path:
        spec = RunSpec.load(path)
        if spec.case != case:
            pytest.skip(f"--spec {path} is a run of the {spec.case} case")
        return spec
    return get_case(case).spec_from(lambda name: getattr(config.option, name, None))


def target_url(config: pytest.Config) -> str | None:
    path = config.getoption("--spec")
    return RunSpec.load(path).target_url if path else config.getoption("--target-url")


def target_from_options(case: str, config: pytest.Config) -> Target:
    """The case's :class:`Target` from the command line; skips when the URL serves another case."""
    spec = spec_for(case, config)
    url = spec.target_url
    if url:
        path = urlsplit(url).path.rstrip("/")
        other = [c.name for c in all_cases().values() if c.name != case and c.path and path.endswith(c.path)]
        if other:
            pytest.skip(f"--target-url {url} serves the {other[0]} case; {case} needs a URL ending in "
                        f"{get_case(case).path} (or one with no case path)")
    return Target.from_spec(spec, session_of(config))


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
    with ServedTarget("tickets", policy=request.config.getoption("--policy")) as served:
        yield served.url


@pytest.fixture
def serve_tickets() -> Iterator[Callable[..., ServedTarget]]:
    """Start reference servers with chosen options; all are stopped after the test."""
    started: list[ServedTarget] = []

    def start(**options: Any) -> ServedTarget:
        t = ServedTarget("tickets", **options).start()
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


def properties_result(exitstatus: int, counts: dict[str, int], first_failure: str,
                      chances: dict[str, int], lacking: dict[str, str] | None = None,
                      waived: list[str] | None = None, off_contract: list[str] | None = None,
                      not_exercised: list[str] | None = None, undecided: list[str] | None = None,
                      rules: dict[str, dict[str, Any]] | None = None) -> StageResult:
    """The properties' outcome, judged once: FAIL when a property failed (the target broke a promise),
    PASS when some ran and all held (listing what ``--without`` waived), INCONCLUSIVE otherwise (none
    ran, a capability the properties needed was missing, the target spoke another API, or pytest
    itself went wrong)."""
    detail = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no tests"
    data = {"counts": counts, "chances": chances, "exitstatus": exitstatus, "lacking": sorted(lacking or {}),
            "waived": list(waived or [])}
    if rules:
        data["rules"] = dict(rules)
    if counts["failed"]:
        return StageResult("properties", "FAIL", [first_failure or "a property failed"], detail=detail, data=data)
    if off_contract or lacking or not_exercised or undecided:
        return StageResult("properties", "INCONCLUSIVE", list(undecided or []) + list(dict.fromkeys(off_contract or []))
                           + [f"properties skipped: {why}" for why in (lacking or {}).values()]
                           + list(not_exercised or []), detail=detail, data=data)
    if exitstatus == 0 and counts["passed"]:
        return StageResult("properties", "PASS", [f"waived: {w}" for w in waived or []], detail=detail, data=data)
    why = ("no property ran against the target (all skipped or none collected)" if exitstatus in (0, 5)
           else f"pytest exited {exitstatus} (an error in the harness or its options)"
           + (f": {first_failure}" if first_failure else ""))
    return StageResult("properties", "INCONCLUSIVE", [why], detail=detail,
                       data={"counts": counts, "chances": chances, "exitstatus": exitstatus})


NOT_EXERCISED_EXIT = 6  # pytest's own codes are 0-5: "every test passed, but a check never had a chance"


def pytest_report_header(config: pytest.Config) -> str:
    url = target_url(config)
    where = url or f"in-process reference target (policy {config.getoption('--policy') or 'the case default'})"
    return f"peakproof: target {where}; hypothesis profile {os.environ.get('HYPOTHESIS_PROFILE', 'dev')}"


@dataclass(eq=False)  # a plugin object: pytest hashes it
class PropertiesSession:
    """What one pytest session of properties learned, and its hooks: registered as a plugin and kept in
    ``config.stash`` (:func:`session_of`) by :func:`pytest_configure`.

    * what the properties could not decide for want of a capability (``lacking``), waived with
      ``--without`` (``waived``) or found off-contract: the result reads them (a skip for a missing
      capability is not a pass);
    * the rules its checks judged by, as stated over a URL (``rules``: case -> rule -> value);
    * the contract stage's results (``contracts``);
    * what ran but decided nothing (``undecided``: a flaky replay with no violation kept, the harness's
      own time limit, a crash of the harness): the session exits NOT_EXERCISED_EXIT, never FAIL;
    * why a check cannot get a chance in this session, when a property knows it (``unreachable``);
    * the chances each check had (``chances``), and the outcomes counted from pytest's own reports.
    """

    chances: ChanceTally = field(default_factory=ChanceTally)
    lacking: set[str] = field(default_factory=set)
    waived: set[str] = field(default_factory=set)
    off_contract: list[str] = field(default_factory=list)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    contracts: list[Any] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"passed": 0, "failed": 0, "skipped": 0, "errors": 0})
    first_failure: str = ""

    # -- pytest's hooks ---------------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when != "call" and report.outcome != "passed"):
            key = {"passed": "passed", "skipped": "skipped"}.get(report.outcome,
                                                                "failed" if report.when == "call" else "errors")
            self.counts[key] += 1
            if key in ("failed", "errors") and not self.first_failure:
                reason = getattr(report, "peakproof_reason", None)
                if reason is None:  # a report this plugin did not classify: pytest's own lines, whole
                    text = str(getattr(report, "longreprtext", "") or report.longrepr or "")
                    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ") and len(ln.strip()) > 2]
                    reason = f"{report.nodeid}: {lines[0] if lines else text.strip()}"
                self.first_failure = reason

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        """A property's failure, read once: a broken promise stays failed (its reason whole); what was
        not the target's (the harness's limit, a flaky replay, a crash of the harness) becomes an
        INCONCLUSIVE skip with its reason, and the session exits NOT_EXERCISED_EXIT."""
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is None or report.outcome != "failed" or Path(str(item.path)).parent.name != "properties":
            return
        from .realtime import failure_kind

        kind, reason = failure_kind(call.excinfo.value)
        report.peakproof_reason = f"{item.nodeid}: {reason}"  # type: ignore[attr-defined]
        if kind == "violation":
            return
        self.undecided.append(f"{item.nodeid}: {reason}")
        if kind == "harness":
            report.sections.append(("peakproof: the harness's error", str(report.longreprtext)))
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"INCONCLUSIVE: {reason}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        # judgements made by the tests in properties/ count for "did the property run test it"
        self.chances.in_property = Path(str(item.path)).parent.name == "properties"
        try:
            yield
        finally:
            self.chances.in_property = False

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        untested = self.not_exercised(config) + self.contract_undecided()
        if (untested or self.undecided) and int(exitstatus) == 0:
            session.exitstatus = NOT_EXERCISED_EXIT
        out = config.getoption("--result", None)
        if not out and config.getoption("--spec", None):
            out = RunSpec.load(config.getoption("--spec")).result
        if out:
            result = properties_result(int(exitstatus), dict(self.counts), self.first_failure,
                                       dict(self.chances.exercised), self.lacking_sentences(), sorted(self.waived),
                                       self.off_contract, untested, list(self.undecided), self.rules)
            result.data["contract"] = [r.to_json() for r in self.contracts]  # peakproof run's contract stage reads it
            result.dump(out)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """How many chances to fail each check had over the run; what could not be tested, and why."""
        tr = terminalreporter
        if self.undecided:
            tr.section(f"peakproof: properties that ran but decided nothing (INCONCLUSIVE, exit {NOT_EXERCISED_EXIT})")
            for line in self.undecided:
                tr.write_line(f"  {line}")
        if self.lacking or self.waived or self.off_contract:
            tr.section("peakproof: not tested against this target")
            for line in dict.fromkeys(self.off_contract):
                tr.write_line(f"  INCONCLUSIVE: {line}")
            for why in self.lacking_sentences().values():
                tr.write_line(f"  INCONCLUSIVE: {why}")
            for name in sorted(self.waived):
                tr.write_line(f"  waived: {name} (--without {name})")
        if self.rules:
            tr.section("peakproof: the target's rules, as stated (the checks judged by them)")
            for case, rules in self.rules.items():
                for rule, value in rules.items():
                    tr.write_line(f"  {case}: {rule}: {value}")
        if self.contracts:
            tr.section("peakproof: the contract, checked by Schemathesis")
            for r in self.contracts:
                for line in r.report().splitlines():
                    tr.write_line(f"  {line}")
        exercised = self.chances.exercised
        if not exercised:
            return
        waived = waived_checks(config)
        tr.section("peakproof: chances to fail, per check (the most one judgement had)")
        for name, n in sorted(exercised.items()):
            why = (f"   <- waived: --without {waived[name]}" if name in waived and not n else
                   "   <- not exercised: this run could not have caught its bug" if not n else "")
            tr.write_line(f"  {name}: {n:,}{why}")
        for cap in sorted(set(waived.values())):
            tr.write_line(f"  waived: {cap} (--without {cap}): "
                          + ", ".join(sorted(k for k, v in waived.items() if v == cap)) + " not checked")
        untested = self.not_exercised(config) + self.contract_undecided()
        if untested:
            tr.section(f"peakproof: checks the properties never gave a chance to fail (exit {NOT_EXERCISED_EXIT})")
            for line in untested:
                tr.write_line(f"  {line}")

    # -- what the session concluded ---------------------------------------------------------------------------

    def not_exercised(self, config: pytest.Config) -> list[str]:
        """A sentence per check the properties judged with no chance to fail over the whole session
        (not waived, not left to a capability the target lacks): the run could not have caught its bug."""
        waived = waived_checks(config)
        lacking = {check for case in all_cases().values() for cap in case.capabilities if cap.name in self.lacking
                   for check in cap.checks}
        return [f"{name}: no chance to fail over the whole property run (no {kind or 'operation that could violate it'} "
                f"in any history it judged): this run could not have caught its bug; "
                + (f"no run with these settings can: {self.unreachable[name]}" if name in self.unreachable else
                   "a longer run (HYPOTHESIS_PROFILE=thorough) or the target's rules stated (--help) may give it one")
                + ", --without waives it"
                for name, (n, kind) in sorted(self.chances.in_properties.items())
                if not n and name not in waived and name not in lacking]

    def contract_undecided(self) -> list[str]:
        return [f"{r.headline()}: " + "; ".join(r.reasons()) for r in self.contracts
                if r.outcome == "INCONCLUSIVE" and not r.skipped]

    def lacking_sentences(self) -> dict[str, str]:
        return {cap.name: cap.sentence() for case in all_cases().values() for cap in case.capabilities
                if cap.name in self.lacking}


SESSION = pytest.StashKey[PropertiesSession]()


def session_of(config: pytest.Config) -> PropertiesSession:
    """This pytest session's :class:`PropertiesSession` (made on first use, e.g. before configure ran)."""
    if SESSION not in config.stash:
        config.stash[SESSION] = PropertiesSession()
    return config.stash[SESSION]


def pytest_configure(config: pytest.Config) -> None:
    session = session_of(config)
    config.pluginmanager.register(session, "peakproof-properties-session")
    push_tally(session.chances)  # judgements made in this session are tallied on it


def pytest_unconfigure(config: pytest.Config) -> None:
    pop_tally(session_of(config).chances)


def waived_checks(config: pytest.Config) -> dict[str, str]:
    """Each check fed by a capability the user waived (--without, or the spec's), to that capability."""
    path = config.getoption("--spec", None)
    without = set(RunSpec.load(path).without if path else (config.getoption("without", None) or ()))
    return {check: cap.name for case in all_cases().values() for cap in case.capabilities if cap.name in without
            for check in cap.checks}
