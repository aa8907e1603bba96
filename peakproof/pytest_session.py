"""One pytest session of properties: what it learned and its hooks (:class:`PropertiesSession`), kept
in ``config.stash`` (:func:`session_of`), and the properties' result judged from it
(:func:`properties_result`). Split over pytest-xdist workers, each worker's session is merged into
its controller's when the worker ends, so the summary and the exit code are the whole run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from .cases import all_cases
from .checks import ChanceTally
from .spec import RunSpec, StageResult


def properties_result(exitstatus: int, counts: dict[str, int], first_failure: str,
                      chances: dict[str, int], lacking: dict[str, str] | None = None,
                      waived: list[str] | None = None, off_contract: list[str] | None = None,
                      not_exercised: list[str] | None = None, undecided: list[str] | None = None,
                      rules: dict[str, dict[str, Any]] | None = None,
                      design: dict[str, list[str]] | None = None, failures: list[str] | None = None) -> StageResult:
    """The properties' outcome, judged once: FAIL when a property failed (the target broke a promise),
    PASS when some ran and all held (listing what ``--without`` waived), INCONCLUSIVE otherwise (none
    ran, a capability the properties needed was missing, the target spoke another API, or pytest
    itself went wrong)."""
    detail = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no tests"
    data = {"counts": counts, "chances": chances, "exitstatus": exitstatus, "lacking": sorted(lacking or {}),
            "waived": list(waived or [])}
    if rules:
        data["rules"] = dict(rules)
    stated = [line for lines in (design or {}).values() for line in lines]
    if stated:
        data["design"] = stated
    if counts["failed"]:
        every = list(dict.fromkeys(failures or [])) or [first_failure or "a property failed"]
        return StageResult("properties", "FAIL", every + stated, detail=detail, data=data)
    if off_contract or lacking or not_exercised or undecided:
        return StageResult("properties", "INCONCLUSIVE", list(undecided or []) + list(dict.fromkeys(off_contract or []))
                           + [f"properties skipped: {why}" for why in (lacking or {}).values()]
                           + list(not_exercised or []), detail=detail, data=data)
    if exitstatus == 0 and counts["passed"]:
        return StageResult("properties", "PASS", [f"waived: {w}" for w in waived or []] + stated, detail=detail,
                           data=data)
    why = ("no property ran against the target (all skipped or none collected)" if exitstatus in (0, 5)
           else f"pytest exited {exitstatus} (an error in the harness or its options)"
           + (f": {first_failure}" if first_failure else ""))
    return StageResult("properties", "INCONCLUSIVE", [why], detail=detail,
                       data={"counts": counts, "chances": chances, "exitstatus": exitstatus})


NOT_EXERCISED_EXIT = 6  # pytest's own codes are 0-5: "every test passed, but a check never had a chance"


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
    design: dict[str, list[str]] = field(default_factory=dict)  # each case's stated design, as the verdict lists it
    contracts: list[Any] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)  # a harness crash's traceback, printed in the summary
    unreachable: dict[str, str] = field(default_factory=dict)
    # how long each property that waits on real time said it would take and took (node id -> what, the figures
    # it said in order, s, what its call took, s, and the time limit it armed): pytest_plugin.Pace fills it
    paces: dict[str, dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"passed": 0, "failed": 0, "skipped": 0, "errors": 0})
    # how the properties' operations ended ("reserve ok", "reserve fail idempotency_key_reused" -> how many): what
    # the run did, said beside a check that never had a chance (a run whose every reserve was refused gives none)
    ended: dict[str, int] = field(default_factory=dict)
    first_failure: str = ""
    failures: list[str] = field(default_factory=list)  # every failed property's reason, in order
    # the first violating run of each property that broke a promise over a URL: (its Target, the run), replayed
    # and shrunk at the session's end (peakproof.replay), outside any test's time limit
    kept: list[Any] = field(default_factory=list)
    witnesses: list[dict[str, Any]] = field(default_factory=list)  # peakproof.witness.Witness.to_json()
    # the histories a property's drivers recorded over a URL during its call: (its Target, the History)
    histories: list[Any] = field(default_factory=list, repr=False)
    kept_before_call: int = 0
    headed: bool = False  # the session's header named the target and the profile
    pytest_session: Any = field(default=None, repr=False)  # pytest's Session (its shouldstop ends the run)

    # -- pytest's hooks ---------------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    def speaks_another_api(self, message: str) -> None:
        """The target answered a call of the contract "no such route": it speaks another API. Nothing after can
        judge it (each property would fail to set up, the contract would list 404s): the session ends after
        this test, INCONCLUSIVE, as it did when every properties session stopped at its first failure."""
        self.off_contract.append(message)
        if self.pytest_session is not None:
            self.pytest_session.shouldstop = f"the target speaks another API: {message}"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.nodeid in self.paces:
            self.paces[report.nodeid]["took"] = round(report.duration, 2)
        if report.when == "call" or (report.when != "call" and report.outcome != "passed"):
            key = {"passed": "passed", "skipped": "skipped"}.get(report.outcome,
                                                                "failed" if report.when == "call" else "errors")
            self.counts[key] += 1
            if key in ("failed", "errors"):  # every failed property, each judged on its own: the first leads
                reason = getattr(report, "peakproof_reason", None)
                if reason is None:  # a report this plugin did not classify: pytest's own lines, whole
                    text = str(getattr(report, "longreprtext", "") or report.longrepr or "")
                    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ") and len(ln.strip()) > 2]
                    reason = f"{report.nodeid}: {lines[0] if lines else text.strip()}"
                self.first_failure = self.first_failure or reason
                self.failures.append(reason)

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
            self.keep_histories(reason)
            return
        self.undecided.append(f"{item.nodeid}: {reason}")
        if kind == "harness":  # a skip's sections are never printed: the summary prints the traceback itself
            self.harness_errors.append(f"{item.nodeid}\n{report.longreprtext}")
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"INCONCLUSIVE: {reason}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        # judgements made by the tests in properties/ count for "did the property run test it"
        self.chances.in_property = Path(str(item.path)).parent.name == "properties"
        from . import history

        if self.chances.in_property:
            history.WATCHERS.append(self.op_ended)
        self.histories, self.kept_before_call = [], len(self.kept)
        try:
            yield
        finally:
            self.chances.in_property = False
            if self.op_ended in history.WATCHERS:
                history.WATCHERS.remove(self.op_ended)

    def note_history(self, target: Any, history: Any) -> None:
        """A driver of ``target`` (over a URL) records into ``history`` during the property now running."""
        if not target.in_process and all(h is not history for _, h in self.histories):
            self.histories.append((target, history))

    def keep_histories(self, reason: str) -> None:
        """A property broke a promise: unless it kept its first violating run itself (a state machine,
        :func:`peakproof.realtime.run_machine`), what its drivers recorded is the run to replay."""
        from .history import merge_histories
        from .realtime import Violation

        parts = [h for _, h in self.histories if len(h.ops)]
        if len(self.kept) > self.kept_before_call or not parts:
            return
        ops = list(parts[0].ops) if len(parts) == 1 else merge_histories([h.ops for h in parts]).ops
        self.kept.append((self.histories[0][0], Violation(reason, [], ops)))

    def op_ended(self, op: Any) -> None:
        """Count how an operation of a property ended (its function, outcome and error)."""
        if op.process == "nemesis":
            return
        key = " ".join(str(x) for x in (op.f, op.type, op.error) if x)
        self.ended[key] = self.ended.get(key, 0) + 1

    def how_ops_ended(self, most: int = 8) -> str:
        """The properties' operations by how they ended, the commonest first: what a run did."""
        top = sorted(self.ended.items(), key=lambda kv: -kv[1])[:most]
        more = len(self.ended) - len(top)
        return "; ".join(f"{key}: {n:,}" for key, n in top) + (f"; {more} other kind(s)" if more > 0 else "")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = session.config
        self.witnesses += reproduce_kept(self.kept)
        self.kept.clear()
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: its controller judges the whole session
            config.workeroutput["peakproof"] = self.to_worker_output()
        untested = self.not_exercised(config) + self.contract_undecided()
        if (untested or self.undecided) and int(exitstatus) == 0:
            session.exitstatus = NOT_EXERCISED_EXIT
        out = config.getoption("--result", None)
        if not out and config.getoption("--spec", None):
            out = RunSpec.load(config.getoption("--spec")).result
        if out:
            result = properties_result(int(exitstatus), dict(self.counts), self.first_failure,
                                       dict(self.chances.exercised), self.lacking_sentences(), sorted(self.waived),
                                       self.off_contract, untested, list(self.undecided), self.rules, self.design,
                                       self.failures)
            result.data["contract"] = [r.to_json() for r in self.contracts]  # peakproof run's contract stage reads it
            result.data["witnesses"] = self.witnesses
            result.dump(out)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """How many chances to fail each check had over the run; what could not be tested, and why."""
        tr = terminalreporter
        if self.witnesses:
            from .witness import Witness

            tr.section("peakproof: a reproduction of each broken promise (the first violating run, replayed and shrunk)")
            for doc in self.witnesses:
                for line in Witness.from_json(doc).verdict_lines():
                    tr.write_line(f"  {line}")
        for error in self.harness_errors:
            tr.section("peakproof: the harness's own error (a bug in peakproof or its options), its traceback",
                       red=True)
            for line in error.splitlines():
                tr.write_line(line)
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
        if self.design:
            tr.section("peakproof: the product's own design, as stated (what it leaves out is not checked)")
            for case, lines in self.design.items():
                for line in lines:
                    tr.write_line(f"  {case}: {line}")
        if self.rules:
            tr.section("peakproof: the target's rules, as stated (the checks judged by them)")
            for case, rules in self.rules.items():
                for rule, value in rules.items():
                    tr.write_line(f"  {case}: {rule}: {value}")
        if self.paces:
            tr.section("peakproof: how long the properties that wait on real time said they would take, and took")
            for node, pace in self.paces.items():
                said = pace["said"]
                then = f" (then {', '.join(f'{s:.1f} s' for s in said[1:])}, from what it measured)" if said[1:] else ""
                took = f"took {pace['took']:.1f} s" if pace.get("took") is not None else "did not end"
                tr.write_line(f"  {node}: said about {said[0]:.1f} s{then}; {took}"
                              + (f"; the harness's limit {pace['limit']:.0f} s" if pace.get("limit") else ""))
        if self.contracts:
            tr.section("peakproof: the contract, checked by Schemathesis")
            for r in self.contracts:
                for line in r.report().splitlines():
                    tr.write_line(f"  {line}")
        exercised = self.chances.exercised
        if not exercised:
            return
        waived = waived_checks(config)
        summed = self.chances.summed_over_examples()
        tr.section("peakproof: chances to fail, per check (the most one judgement had; all examples' added up)")
        for name, n in sorted(exercised.items()):
            why = (f"   <- waived: --without {waived[name]}" if name in waived and not n else
                   "   <- not exercised: this run could not have caught its bug" if not n else "")
            tr.write_line(f"  {name}: {n:,}; {summed.get(name, n):,} in all{why}")
        for cap in sorted(set(waived.values())):
            tr.write_line(f"  waived: {cap} (--without {cap}): "
                          + ", ".join(sorted(k for k, v in waived.items() if v == cap)) + " not checked")
        untested = self.not_exercised(config) + self.contract_undecided()
        if untested:
            tr.section(f"peakproof: checks the properties never gave a chance to fail (exit {NOT_EXERCISED_EXIT})")
            for line in untested:
                tr.write_line(f"  {line}")

    # -- sessions split over pytest-xdist workers --------------------------------------------------------------
    # Each worker keeps its own session; when a worker ends, the controller merges what it learned, so the
    # chances summary, "no chance over the whole run" (exit 6) and the result are the whole session's.

    def to_worker_output(self) -> dict[str, Any]:
        return {"exercised": self.chances.exercised, "in_properties": self.chances.in_properties,
                "summed": self.chances.summed_over_examples(),
                "lacking": sorted(self.lacking), "waived": sorted(self.waived), "off_contract": self.off_contract,
                "rules": self.rules, "design": self.design, "failures": self.failures, "undecided": self.undecided, "unreachable": self.unreachable,
                "harness_errors": self.harness_errors, "paces": self.paces, "ended": self.ended,
                "contracts": [_ContractEcho.of(r).__dict__ for r in self.contracts], "witnesses": self.witnesses}

    def merge(self, doc: dict[str, Any]) -> None:
        for name, n in doc.get("exercised", {}).items():
            self.chances.exercised[name] = max(self.chances.exercised.get(name, 0), n)
        for name, n in doc.get("summed", {}).items():
            self.chances.summed[name] = self.chances.summed.get(name, 0) + n
        for name, (n, kind) in doc.get("in_properties", {}).items():
            seen = self.chances.in_properties.get(name, (0, kind))[0]
            self.chances.in_properties[name] = (max(seen, n), kind)
        self.lacking |= set(doc.get("lacking", ()))
        self.waived |= set(doc.get("waived", ()))
        self.off_contract += doc.get("off_contract", [])
        self.rules.update(doc.get("rules", {}))
        self.design.update(doc.get("design", {}))
        self.failures += doc.get("failures", [])
        self.undecided += doc.get("undecided", [])
        self.harness_errors += doc.get("harness_errors", [])
        self.unreachable.update(doc.get("unreachable", {}))
        self.paces.update(doc.get("paces", {}))
        for key, n in doc.get("ended", {}).items():
            self.ended[key] = self.ended.get(key, 0) + n
        self.contracts += [_ContractEcho(**c) for c in doc.get("contracts", [])]
        self.witnesses += doc.get("witnesses", [])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        doc = getattr(node, "workeroutput", {}).get("peakproof")
        if doc:
            self.merge(doc)

    # -- what the session concluded ---------------------------------------------------------------------------

    def not_exercised(self, config: pytest.Config) -> list[str]:
        """A sentence per check the properties judged with no chance to fail over the whole session
        (not waived, not left to a capability the target lacks): the run could not have caught its bug."""
        waived = waived_checks(config)
        lacking = {check for case in all_cases().values() for cap in case.capabilities if cap.name in self.lacking
                   for check in cap.checks}
        fed_by = {check: cap.name for case in all_cases().values() for cap in case.capabilities for check in cap.checks}

        def waiver(name: str) -> str:  # only a capability's checks can be waived: name the flag, or say none
            stating = [h for h in (d.undecided_hint(name) for d in self.chances.designs.values()) if h]
            if stating:  # a design of its own would make the check meaningless: what to state
                return "; " + "; or ".join(stating)
            if name in fed_by:
                return f"; if your service has no {fed_by[name]}, --without {fed_by[name]} waives it"
            return "; it is a promise of the design itself: no option waives it"
        return [f"{name}: no chance to fail over the whole property run (no {kind or 'operation that could violate it'} "
                f"in any history it judged): this run could not have caught its bug; "
                + (f"no run with these settings can: {self.unreachable[name]}" if name in self.unreachable else
                   "a longer run (HYPOTHESIS_PROFILE=thorough) or the target's rules stated (--help) may give it one")
                + waiver(name) + (f"; the run's operations ended so: {self.how_ops_ended()}" if self.ended else "")
                for name, (n, kind) in sorted(self.chances.in_properties.items())
                if not n and name not in waived and name not in lacking]

    def contract_undecided(self) -> list[str]:
        return [f"{r.headline()}: " + "; ".join(r.reasons()) for r in self.contracts
                if r.outcome == "INCONCLUSIVE" and not r.skipped]

    def lacking_sentences(self) -> dict[str, str]:
        return {cap.name: cap.sentence() for case in all_cases().values() for cap in case.capabilities
                if cap.name in self.lacking}


def reproduce_kept(kept: list[Any]) -> list[dict[str, Any]]:
    """Each kept violating run (a property's, over a URL) as a witness of the checks its history breaks,
    replayed and shrunk against its target within the run's ``--replay-seconds`` in all."""
    import time

    from .history import History
    from .replay import hooks_for
    from .shrink import property_witness, reproduce

    out: list[dict[str, Any]] = []
    started = time.monotonic()
    for target, violation in kept:
        hooks = hooks_for(target.run.case)
        if hooks is None:
            continue
        spec = target.run_spec()
        run = target.run.with_spec(spec)
        stem = f"properties-{target.case}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            failed = [r for r in hooks.checks(target.new_driver(History(time.time)), violation.ops, spec)
                      if r.valid is False]
            left = max(0.0, spec.replay_seconds - (time.monotonic() - started))
            found = reproduce(run, violation.ops, failed, seconds=left, directory=spec.report_dir,
                              stem=stem) if failed else [property_witness(run, violation, stem)]
        except Exception as e:  # noqa: BLE001 - the verdict stands; its reproduction is lost, and said so
            found = [property_witness(run, violation, stem, f"its checks or its replay raised {type(e).__name__}: "
                                                              f"{e}"[:300])]
        out += [w.to_json() for w in found]
        _report(target, spec, violation, found, stem)
    return out


def _report(target: Any, spec: Any, violation: Any, found: list[Any], stem: str) -> None:
    """The reproductions of one property's violation as an HTML report in ``--report-dir`` (listed in its
    index beside the loads'): the violated checks, then each witness's table, rate and files."""
    import time

    from .checks import CheckResult
    from .report import RunReport, write_report

    ops = [op for op in violation.ops if op.done]
    began = min((op.invoke_time for op in ops), default=time.time())
    checks = [CheckResult(w.check, False, {"violations": 1}, w.violation or violation.message.strip().splitlines()[0])
              for w in found]  # the first violating run's (a property stops at its first)
    report = RunReport(stem.rsplit("-", 2)[0], target.url or "", began, time.time(),
                       {"stage": "URL properties: the first violating run of a property", "case": target.case,
                        "the property's words": violation.message.strip()[:2000]}, checks, [], [], witnesses=found)
    try:
        write_report(report, spec.report_dir)
    except OSError:  # a folder that cannot be written: the verdict and the terminal still carry every witness
        pass


@dataclass
class _ContractEcho:
    """A contract stage's result as a worker reported it to its controller (what the summary reads)."""

    outcome: str
    skipped: bool
    headline_text: str
    reasons_list: list[str]
    report_text: str
    json: dict[str, Any]

    @classmethod
    def of(cls, r: Any) -> "_ContractEcho":
        return r if isinstance(r, cls) else cls(r.outcome, bool(r.skipped), r.headline(), list(r.reasons()),
                                                r.report(), r.to_json())

    def headline(self) -> str:
        return self.headline_text

    def reasons(self) -> list[str]:
        return self.reasons_list

    def report(self) -> str:
        return self.report_text

    def to_json(self) -> dict[str, Any]:
        return self.json


SESSION = pytest.StashKey[PropertiesSession]()


def session_of(config: pytest.Config) -> PropertiesSession:
    """This pytest session's :class:`PropertiesSession` (made on first use, e.g. before configure ran)."""
    if SESSION not in config.stash:
        config.stash[SESSION] = PropertiesSession()
    return config.stash[SESSION]


def waived_checks(config: pytest.Config) -> dict[str, str]:
    """Each check fed by a capability the user waived (--without, or the spec's), to that capability."""
    path = config.getoption("--spec", None)
    without = set(RunSpec.load(path).without if path else (config.getoption("without", None) or ()))
    return {check: cap.name for case in all_cases().values() for cap in case.capabilities if cap.name in without
            for check in cap.checks}


def max_wait(config: Any) -> float:
    """The longest one wait a property may plan (``--max-wait``, or the spec's): pytest_plugin.Pace."""
    option = getattr(config, "option", None)
    path = getattr(option, "spec", None)
    if path:
        return float(RunSpec.load(path).max_wait)
    given = getattr(option, "max_wait", None)
    return float(given) if given is not None else RunSpec.max_wait
