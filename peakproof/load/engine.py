"""The open-model engine on Locust: its state per process, Locust's listeners, the user and the shape.

Locust is closed-loop (users wait for answers), so a slow target lowers the offered load
and hides its own latency. Here one dispatcher per Locust process
(:func:`peakproof.load.dispatch.dispatch`) walks a precomputed arrival schedule and sends
each request at its intended instant; under ``--processes N`` or ``--master/--worker`` the
schedule is split across workers and their histories are merged on the master, which
judges (:func:`peakproof.load.judge.judge_run`) once and writes the report, the stage's
result (``--result``) and Locust's exit code.

``locust -f loadtests/ --headless --host URL --scenario NAME`` runs exactly one scenario, chosen by
name, with one shape class (this module's), whatever files ``loadtests/`` holds. The run is one
:class:`~peakproof.spec.RunSpec`, read from ``--spec`` or built from Locust's command line by the same
options and resolution as ``peakproof run``. It imports locust and gevent: only Locust processes load it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust import LoadTestShape, User, events, task
from locust.runners import MasterRunner, WorkerRunner

from ..cases import all_options, get_case, run_of
from ..errors import PeakproofError, TargetError, UsageError
from ..history import History, merge_histories
from ..junit import write_scenario
from ..report import write_report
from ..options import LOCUST, add_options
from ..slo import parse_thresholds
from ..spec import RunFacts, RunSpec, StageResult
from . import messages
from .dispatch import dispatch, harness_error
from .judge import RunRecord, conclude_calibration, judge_run, summary, witnesses_of
from .scenario import SCENARIOS, Calibration, Scenario


@dataclass
class Engine:
    environment: Any
    spec: RunSpec
    scenario: Scenario
    history: History = field(default_factory=lambda: History(time.time))
    shared: dict[str, Any] | None = None
    started_wall: float = 0.0
    share: tuple[int, int] | None = None  # (index, count) of this worker
    done: bool = False  # this process's dispatcher finished
    finished: bool = False  # master/local: everything judged
    worker_parts: list[list[Any]] = field(default_factory=list)
    workers_done: int = 0
    counters: dict[str, int] = field(default_factory=lambda: {"due": 0, "sent": 0, "late": 0, "dropped": 0,
                                                                 "pool_full": 0, "late_by_pool": 0,
                                                                 "late_by_pool_busy": 0})
    dropped_by_second: dict[int, int] = field(default_factory=dict)
    report_path: str | None = None
    setup_error: tuple[str, str] | None = None  # ("target" | "undecided" | "harness", text)
    harness_errors: list[str] = field(default_factory=list)  # tracebacks from perform / monitor
    setup_done: bool = False  # the scenario's bound counts from here (a big graph's setup takes a while)
    source_address: str | None = None  # this process's own (a worker's), never the master's
    meter: Any = None  # peakproof.tenants.TenantMeter: who else used the machine's CPU (master/local only)

    @property
    def is_master(self) -> bool:
        return isinstance(self.environment.runner, MasterRunner)

    @property
    def is_worker(self) -> bool:
        return isinstance(self.environment.runner, WorkerRunner)

    def now(self) -> float | None:
        """Seconds since the run's first instant (None before it started)."""
        return time.time() - self.started_wall if self.started_wall and self.setup_done else None


class _Process:
    """This process's engine and Locust environment, and the last verdict (for the web UI)."""

    engine: Engine | None = None
    environment: Any = None
    own_source_address: str | None = None
    last: dict[str, Any] = {}


PROCESS = _Process()


USAGE_EXIT = 4  # a usage error (as peakproof's and pytest's own), never INCONCLUSIVE's 2


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    def error(message: str) -> None:  # Locust's parser exits 2 on a bad option: ours is 4
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: {message}\n")
        sys.exit(USAGE_EXIT)

    parser.error = error
    group = parser.add_argument_group("peakproof", "open-model scenarios (peakproof)")
    add_options(group, LOCUST, all_options())
    for action in group._group_actions:  # the scenarios the locustfiles registered: the web UI's drop-down
        if action.dest == "scenario":
            action.choices = [""] + sorted(SCENARIOS)


def spec_from_options(opts: Any, host: str | None) -> RunSpec:
    """The run's spec: ``--spec FILE`` as written, or Locust's command line resolved as ``peakproof run`` does."""
    if getattr(opts, "spec", None):
        spec = RunSpec.load(opts.spec)
        if getattr(opts, "result", None):
            spec = spec.with_options(result=opts.result)
        return spec if spec.target_url else spec.with_options(target_url=host)
    cls = SCENARIOS[opts.scenario]
    case = get_case(cls.case)
    spec = case.spec_from(_typed(opts),
                          # Locust's own --host first (what a Locust user gives), else --target-url
                          target_url=host or getattr(opts, "target_url", None) or None,
                          html=getattr(opts, "html_file", None))
    return case.resolved(spec)


def _typed(opts: Any) -> Any:
    """Option values by name, parsed by their option's own parser where they came as text (Locust's
    web UI form sets what the user typed, as typed); an empty field is no value."""
    kinds = {o.name: o.kind for o in all_options()}

    def get(name: str) -> Any:
        value = getattr(opts, name, None)
        if isinstance(value, str) and kinds.get(name) is not None:
            if value.strip() == "":
                return None
            try:
                return kinds[name](value)  # type: ignore[misc]
            except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
                raise UsageError(f"--{name.replace('_', '-')}", str(e), value) from None
        return value

    return get


def _check(opts: Any) -> str | None:
    """Why this command line cannot run (None: it can)."""
    name = opts.scenario
    if getattr(opts, "spec", None) and not name:
        try:
            name = RunSpec.load(opts.spec).scenario
        except PeakproofError as e:
            return str(e)
    if name not in SCENARIOS:
        listing = "\n".join(f"  {n}: {SCENARIOS[n].description}" for n in sorted(SCENARIOS))
        return (f"--scenario: expected one of the scenarios below; got {name!r}.\n{listing}\n"
                "Name one with --scenario NAME (or PEAKPROOF_SCENARIO).")
    try:
        parse_thresholds(opts.slo or [])
    except UsageError as e:
        return str(e)
    return None


def _new_engine(environment: Any) -> Engine:
    opts = environment.parsed_options
    spec = spec_from_options(opts, environment.host)
    if not spec.scenario:
        spec = spec.with_options(scenario=opts.scenario)
    if spec.html is None and getattr(opts, "html_file", None):
        spec = spec.with_options(html=opts.html_file)
    # this process's run record, built once (with what peakproof run learned, beside the request in its file):
    # a driver that cannot be loaded is said before anything is sent
    facts = RunFacts.load(getattr(opts, "spec", None))
    return Engine(environment, spec, SCENARIOS[spec.scenario](run_of(spec, facts)),
                  source_address=PROCESS.own_source_address)


@events.init.add_listener
def _init(environment: Any, **_: Any) -> None:
    opts = environment.parsed_options
    if opts is None:
        return
    runner = environment.runner
    PROCESS.environment = environment
    # this process's own: Locust overwrites a worker's options with the master's at each spawn
    PROCESS.own_source_address = getattr(opts, "source_address", None)
    if isinstance(runner, MasterRunner):
        runner.register_message(messages.OPS, _on_ops)
        runner.register_message(messages.DONE, _on_done)
    elif isinstance(runner, WorkerRunner):
        runner.register_message(messages.PLAN, _on_plan)
    from .. import webui

    webui.install(environment, lambda: PROCESS.engine, PROCESS.last)
    if not opts.scenario and not getattr(opts, "spec", None) and (isinstance(runner, WorkerRunner)
                                                                   or not opts.headless):
        return  # the web UI's start form names it (a worker: the master's plan does)
    why, code = _check(opts), USAGE_EXIT
    if why is None:
        try:
            PROCESS.engine = _new_engine(environment)
            return
        except UsageError as e:
            why = str(e)
        except PeakproofError as e:
            why, code = str(e), 2
    sys.stderr.write(f"peakproof: {why}\n")
    sys.exit(code)


def _engine_for_this_start(environment: Any) -> Engine | None:
    """The engine of the run starting now: the one made at start-up (headless), or, from the web UI,
    one made from the start form (a new one for each run started there)."""
    opts = environment.parsed_options
    eng = PROCESS.engine
    if eng is not None and not eng.finished and eng.scenario.name == (opts.scenario or eng.spec.scenario):
        return eng
    why = _check(opts)
    PROCESS.last.clear()
    if why is None:
        try:
            PROCESS.engine = _new_engine(environment)
            return PROCESS.engine
        except PeakproofError as e:
            why = str(e)
    if opts.scenario not in SCENARIOS:
        why = f"--scenario: choose one of {', '.join(sorted(SCENARIOS))} (got {opts.scenario!r})"
    PROCESS.last.update(outcome="NOT STARTED", reasons=[why.splitlines()[0]])
    return None  # the shape's tick gets no engine and ends the run at once


@events.test_start.add_listener
def _test_start(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return
    eng = _engine_for_this_start(environment)
    if eng is None:
        return
    eng.started_wall = time.time()
    try:
        eng.shared = eng.scenario.setup()
        eng.scenario.adopt(eng.shared)
        if isinstance(eng.scenario, Calibration):  # its ladder starts from the target's own answer time
            eng.shared.update(eng.scenario.start_from_the_target())
        eng.setup_done = True
        _hold_full_collections()
        eng.started_wall = time.time()  # the run starts after its setup (the master adds a lead below)
    except (Exception, SystemExit) as e:  # report it, send nothing, stop
        from ..capabilities import CapabilityMissing
        from ..errors import OffContract, SetupUnanswered

        if isinstance(e, (CapabilityMissing, OffContract, SetupUnanswered)):  # undecided: another API, a
            # capability it lacks, or a set-up the target never answered
            eng.setup_error = ("undecided", str(e))
        elif isinstance(e, TargetError):  # the target refused, answered 500 or garbage: a finding
            eng.setup_error = ("target", str(e))
        elif isinstance(e, SystemExit):
            eng.setup_error = ("target", str(e.code))
        elif isinstance(e, UsageError):  # the options cannot run this scenario: say which
            eng.setup_error = ("harness", str(e))
        else:  # our own bug: the run cannot say anything about the target
            eng.setup_error = ("harness", traceback.format_exc())
        sys.stderr.write(f"peakproof: {eng.scenario.name}: setup failed: {eng.setup_error[1]}\n")
        eng.shared = {}
        eng.done = True
        if eng.is_master:  # workers wait for a plan; tell them there is nothing to send
            environment.runner.send_message(messages.PLAN, messages.plan(0, {}, time.time()))
        gevent.spawn(_monitor_loop, eng)
        return
    eng.meter = _tenant_meter(eng)
    if eng.is_master:
        # Workers start their users a little after this message: give the schedule a lead
        # so that its first instant is still ahead of every worker (else it starts late).
        eng.started_wall = time.time() + 1.0
        n = max(1, environment.runner.worker_count)
        environment.runner.send_message(messages.PLAN, messages.plan(n, eng.shared, eng.started_wall, eng.spec,
                                                                     environment.host, eng.scenario.run.facts))
    else:
        eng.share = (0, 1)
    gevent.spawn(_monitor_loop, eng)


def _hold_full_collections() -> None:
    """No full garbage collection while the run dispatches: the history grows by every operation, and
    each full pass over it stalled the dispatcher for 100-150 ms (p99 from the intended instant past the
    seed's 100 ms, every few seconds). Young generations still run; refcounting frees the acyclic rest;
    the run is bounded in time, so what cycles wait is bounded too."""
    import gc

    gc.collect()
    gc.freeze()  # what the setup built (graphs, schedules) stays out of every pass
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1_000_000)


@events.test_stop.add_listener
def _test_stop(environment: Any, **_: Any) -> None:
    eng = PROCESS.engine
    if eng is not None and not eng.is_worker and not eng.finished and eng.started_wall:
        _finish(eng)  # stopped early (bound reached, Ctrl-C): judge what was recorded


def _on_plan(msg: Any, **_: Any) -> None:
    data = msg.data
    eng = PROCESS.engine
    if data.get("spec") and (eng is None or eng.finished or eng.scenario.name != data["spec"]["scenario"]):
        # the master chose the scenario (its start form or its command line): run that spec
        env = PROCESS.environment
        spec = RunSpec.from_json(data["spec"]).with_options(source_address=PROCESS.own_source_address)
        if not spec.target_url:
            spec = spec.with_options(target_url=env.host or data.get("host"))
        env.host = env.host or data.get("host")
        facts = RunFacts.from_json(data.get("facts"))  # what the master's peakproof run learned
        eng = PROCESS.engine = Engine(env, spec, SCENARIOS[spec.scenario](run_of(spec, facts)),
                                      source_address=PROCESS.own_source_address)
    assert eng is not None
    if data["count"] == 0:  # the master's setup failed: nothing to send
        eng.done = True
        if eng.is_worker:
            _send_history(eng)
        return
    eng.shared = data["shared"]
    eng.scenario.adopt(eng.shared)
    if isinstance(eng.scenario, Calibration):
        eng.scenario.adopt_rates(eng.shared)
    eng.share = (eng.environment.runner.worker_index, data["count"])
    eng.started_wall = data["t0"]
    _hold_full_collections()
    eng.setup_done = True


def _on_ops(msg: Any, **_: Any) -> None:
    assert PROCESS.engine is not None
    PROCESS.engine.worker_parts.append(msg.data["ops"])


def _on_done(msg: Any, **_: Any) -> None:
    eng = PROCESS.engine
    assert eng is not None
    messages.merge_done(msg.data, eng.counters, eng.dropped_by_second, eng.harness_errors)
    eng.workers_done += 1


def _send_history(eng: Engine) -> None:
    messages.send_history(eng.environment.runner, eng.history.ops, eng.counters, eng.harness_errors,
                          eng.dropped_by_second)


def _tenant_meter(eng: Engine) -> Any:
    """Who uses this machine's CPU from now to the judgement, read every second (peakproof.tenants)."""
    from ..tenants import TenantMeter

    try:
        meter = TenantMeter.for_spec(eng.spec, eng.scenario.run.facts, eng.scenario.host)
    except Exception as e:  # noqa: BLE001 - reading /proc must never stop a run; the figures say unknown
        harness_error(eng, "reading the machine's tenants", e)
        return None

    def loop() -> None:
        while not eng.finished:
            gevent.sleep(1.0)
            if not eng.finished:
                meter.sample()

    gevent.spawn(loop)
    return meter


def _monitor_loop(eng: Engine) -> None:
    while not eng.finished:
        try:
            eng.scenario.monitor(eng.history, eng.now())
        except Exception as e:  # the target's failures are recorded by the driver; this is our bug
            harness_error(eng, f"{eng.scenario.name}.monitor", e)
        gevent.sleep(eng.scenario.monitor_interval)


class OpenModelUser(User):
    """One per Locust process: walks this process's share of the arrival schedule."""

    @task
    def dispatch(self) -> None:
        eng = PROCESS.engine
        if eng is None or eng.done:
            gevent.sleep(0.2)
            return
        deadline = time.monotonic() + 30
        while eng.share is None:  # a worker waits for the master's plan
            if time.monotonic() > deadline:
                sys.stderr.write("peakproof: no plan from the master within 30 s; this worker sends nothing\n")
                eng.done = True
                return
            gevent.sleep(0.05)
        try:
            dispatch(eng)
        finally:
            eng.done = True
            if eng.is_worker:
                _send_history(eng)


class ScenarioShape(LoadTestShape):
    """One dispatcher per process for as long as the scenario runs; then stop."""

    def tick(self) -> tuple[int, float] | None:
        eng = PROCESS.engine
        runner = self.runner
        if not isinstance(runner, WorkerRunner) and (eng is None or (eng.finished and self.get_run_time() < 1)):
            eng = _engine_for_this_start(runner.environment)  # a run started from the web UI's form
        if eng is None:
            return None
        workers = runner.worker_count if isinstance(runner, MasterRunner) else 1
        hard = eng.spec.max_run_seconds
        # the scenario's own bound counts from the end of its setup; --max-run-seconds from the start
        since_setup = time.time() - eng.started_wall if eng.setup_done else 0.0
        if eng.finished or self.get_run_time() > hard or since_setup > eng.scenario.bound_seconds() + 30:
            return None
        if isinstance(runner, MasterRunner):
            if eng.workers_done >= workers > 0:
                _finish(eng)
                return None
        elif eng.done:
            _finish(eng)
            return None
        return max(1, workers), max(1, workers) * 10


def _finish(eng: Engine) -> None:
    if eng.finished:
        return
    if eng.is_master:
        gevent.sleep(0.5)  # the last op chunks travel with the done message
    if eng.setup_error is None:
        try:
            eng.scenario.finish(eng.history)
        except Exception as e:  # noqa: BLE001 - a final read that raised is our bug, not the target's
            harness_error(eng, f"{eng.scenario.name}.finish", e)
    eng.finished = True
    _conclude(eng)


def _record(eng: Engine) -> RunRecord:
    runner = eng.environment.runner
    html = eng.spec.html
    if html:  # a link relative to the report, which lives in the report directory
        html = os.path.relpath(os.path.abspath(html), os.path.abspath(eng.spec.report_dir))
    tenancy = eng.meter.result() if eng.meter is not None else None
    return RunRecord(eng.started_wall, time.time(), runner.worker_count if isinstance(runner, MasterRunner) else 1,
                     eng.counters, eng.dropped_by_second, eng.setup_error, list(eng.harness_errors), html, tenancy)


def _conclude(eng: Engine) -> None:
    """Judge once; write the report, the stage's result and Locust's exit code."""
    spec, sc = eng.spec, eng.scenario
    history = merge_histories([eng.history.ops] + eng.worker_parts, time.time) if eng.is_master else eng.history
    rec = _record(eng)
    if isinstance(sc, Calibration):
        doc = conclude_calibration(sc, history, rec)
        ok = bool(doc.get("rate"))
        print(f"peakproof {sc.name}: {doc.get('rate', 0):,.0f} arrivals/s on time on one process"
              + (f" (setup failed: {doc['error']})" if "error" in doc else ""), flush=True)
        _write_result(spec, StageResult(sc.name, "PASS" if ok else "INCONCLUSIVE", [] if ok else
                                        [doc.get("error") or "not even the first step was on time"], data=doc))
        eng.environment.process_exit_code = 0 if ok else 2
        return
    report = witnesses_of(sc, history, spec, judge_run(sc, history, spec, rec))
    path = write_report(report, spec.report_dir)
    eng.report_path, judged = str(path), report.judged
    if spec.save_history:
        history.dump(path.with_suffix(".history.jsonl"))
    eng.environment.process_exit_code = judged.outcome.exit_code
    print(summary(report, path), flush=True)
    load = report.load[0].counts if report.load else {}
    results = [r for group in (report.load, report.checks, report.slos) for r in group]
    _write_result(spec, StageResult(
        sc.name, str(judged.outcome), list(judged.reasons), [r.to_json() for r in results],
        detail=(f"{load.get('sent', 0):,} requests, peak {load.get('peak_sent_per_s', 0):,}/s sent vs "
                f"{load.get('peak_target_per_s', 0):,}/s due; report {path}"),
        report=str(path), data={"load": load, "harness_errors": report.harness_errors,
                                "witnesses": [w.to_json() for w in report.witnesses],
                                "tenancy": rec.tenancy.to_json() if rec.tenancy else None,
                                "rules": next((v for k, v in report.params.items() if "rules" in k), {})}))
    if spec.junit:  # locust -f loadtests/ --junit FILE: the scenario's verdict for a CI system's test report
        print(f"peakproof {sc.name}: JUnit XML " + str(write_scenario(
            spec.junit, spec.case, sc.name, judged, results, path, rec.finished_wall - rec.started_wall)))
    PROCESS.last.update(outcome=str(judged.outcome), reasons=list(judged.reasons), report=str(path),
                        lines=[r.line().splitlines()[0] for r in results])


def _write_result(spec: RunSpec, result: StageResult) -> None:
    if spec.result:  # a Locust run without peakproof run's --result writes none
        result.dump(spec.result)


__all__ = ["Engine", "OpenModelUser", "ScenarioShape", "spec_from_options"]
