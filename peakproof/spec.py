"""A run, resolved once: the request (:class:`RunSpec`), what the run learns as it goes
(:class:`RunFacts`), and what each stage gives back (:class:`StageResult`).

``peakproof run`` parses its command line once into a spec; every stage reads that spec, in
process or, in a child process, from a file (``--spec spec.json``, the facts known by then beside
it under ``facts``), and writes a structured
result (``--result result.json``) that the parent reads. Nothing re-parses another stage's
text, nothing finds a report by its name, and the verdict is judged once (by the stage that
ran the checks) and read everywhere after. ``locust -f loadtests/`` and ``pytest
properties/`` build the same spec from their own command lines, by the same options
(:mod:`peakproof.options`) and the same resolution (:meth:`peakproof.case.Case.resolved`). A spec
names its case; it imports no case: the :class:`~peakproof.case.Case` reads specs, not the other way.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from .errors import UsageError


@dataclass(frozen=True)
class RunSpec:
    """What the user asks for: which case, which target, which load, how it is judged (what the run learns
    on the way, its placement, pids and calibration's limit, is :class:`RunFacts`)."""

    case: str
    target_url: str | None = None  # None: the embedded reference (started by the run)
    policy: str | None = None
    driver: str | None = None
    openapi: str | None = None  # the contract stage's OpenAPI (URL or file); None: the case's own contract
    strict_contract: bool = False  # every contract finding FAILs, the notes (no design promise broken) too
    admin_token: str | None = None
    token: str | None = None  # the token of every call, for a driver whose auth is "every" (else --admin-token)
    scenario: str = ""  # the stage's scenario (a load stage); "" for the run as a whole
    scale: float | str = "auto"  # "auto" until the calibration has fitted it
    time_scale: float | str | None = None  # None: the case's default
    duration: float | None = None  # None: the case's default
    processes: int | str = 1
    faults: bool = False
    slo: tuple[str, ...] = ()  # empty: the scenario's own, with the default error budget
    without: tuple[str, ...] = ()  # capabilities the user says the target lacks (their checks are waived)
    spacing: str = "uniform"
    seed: int = 20260730
    pool_size: int = 1000
    connections: int = 1000
    source_address: str | None = None
    request_timeout: float = 5.0
    max_lateness: float = 2.0
    late_threshold: float = 0.1
    offered_tolerance: float = 0.02
    max_run_seconds: float = 900.0
    save_history: bool = False
    report_dir: str = "reports"
    stop_at_first: bool = False  # over a URL, a property ends at its first broken promise (peakproof.realtime)
    max_wait: float = 300.0  # s one wait a property plans may take at most (pytest_plugin.Pace)
    replay_seconds: float = 60.0  # after a FAIL: replaying and shrinking its witnesses (peakproof.replay)
    junit: str | None = None  # where the verdict goes as JUnit XML too (peakproof.junit); None: nowhere
    calibrated_rate: float | None = None
    calibrate_max_rate: float | None = None
    calibrate_min_rate: float | None = None  # the ladder's first step (None: 2% of the peak)
    calibrate_latency: bool = False
    # what discovery cannot see (peakproof.components): --target-process PATTERN|PID, --target-cgroup PATH
    target_process: tuple[str, ...] = ()
    target_cgroup: str | None = None
    skip_properties: bool = False
    skip_load: bool = False
    result: str | None = None  # where the stage writes its StageResult
    html: str | None = None  # Locust's own HTML report of a load stage (linked from ours)
    case_options: Mapping[str, Any] = field(default_factory=dict)  # the case's own options (Case.options)

    def with_options(self, **changes: Any) -> "RunSpec":
        return replace(self, **changes)

    def with_case_options(self, **changes: Any) -> "RunSpec":
        return replace(self, case_options={**self.case_options, **changes})

    def opt(self, name: str, default: Any = None) -> Any:
        """One of the case's own options (``Case.options``), or ``default``."""
        v = self.case_options.get(name)
        return default if v is None else v

    @property
    def url(self) -> str:
        if not self.target_url:
            raise UsageError("the run spec", "a target URL (the embedded target is started before a stage runs)",
                             None)
        return self.target_url

    @property
    def number_scale(self) -> float:
        if not isinstance(self.scale, (int, float)):
            raise UsageError("--scale", "a number by now (the calibration fits 'auto')", self.scale)
        return float(self.scale)

    @property
    def number_time_scale(self) -> float:
        if not isinstance(self.time_scale, (int, float)):
            raise UsageError("--time-scale", "a number by now (the calibration fits 'auto')", self.time_scale)
        return float(self.time_scale)

    # -- as a file ------------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["slo"] = list(self.slo)
        d["without"] = list(self.without)
        d["target_process"] = list(self.target_process)
        d["case_options"] = dict(self.case_options)
        return d

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "RunSpec":
        doc = {k: v for k, v in doc.items() if k != FACTS}  # what the run learned rides beside: RunFacts
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown or "case" not in doc:
            raise UsageError("a run spec", "the fields of peakproof.spec.RunSpec", unknown or doc,
                             "Write specs with peakproof run (or RunSpec.dump).")
        d = dict(doc)
        d["slo"] = tuple(d.get("slo") or ())
        d["without"] = tuple(d.get("without") or ())
        d["target_process"] = tuple(d.get("target_process") or ())
        return cls(**d)

    def dump(self, path: str | Path, facts: "RunFacts | None" = None) -> Path:
        """The request as a stage's file, with what the run learned so far beside it (``facts``)."""
        p = Path(path)
        doc = self.to_json()
        if facts is not None:
            doc[FACTS] = facts.to_json()
        p.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> "RunSpec":
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UsageError("--spec", "a run spec file (JSON) written by peakproof run", str(path), str(e)) from None
        return cls.from_json(doc)


FACTS = "facts"  # the key of a stage file's RunFacts, beside the request's fields


@dataclass(frozen=True)
class RunFacts:
    """What ``peakproof run`` learned as it went, which no user asks for: passed to each stage beside the
    request (a stage file's ``facts``), never mixed into it. A stage run directly (``locust -f loadtests/``,
    ``pytest properties/``) has none: every field says "not known" and its reader finds out for itself."""

    embedded: bool = False  # the target is the reference this run started (its cores are the run's)
    # the run's own processes, so that a stage can tell them from the machine's other tenants (peakproof.tenants):
    # the root of the run's process tree (None: the stage's own process) and the target's processes here
    run_pid: int | None = None
    target_pids: tuple[int, ...] = ()
    # what ran where (the placement, said before the load) and, when the target shared cores with the
    # generators, why its latency was partly the harness's ("": said not shared; None: not stated)
    placement: str | None = None
    shared_cores: str | None = None
    # what stopped the calibration's ladder ("target": the rate is the target's knee, not the generator's limit,
    # so a curve above it is still the generator's to offer; "top": a floor; None: the generator's, or not said)
    calibrated_by: str | None = None

    def learned(self, **changes: Any) -> "RunFacts":
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["target_pids"] = list(self.target_pids)
        return d

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> "RunFacts":
        doc = dict(doc or {})
        unknown = sorted(set(doc) - {f.name for f in fields(cls)})
        if unknown:
            raise UsageError("a run spec's facts", "the fields of peakproof.spec.RunFacts", unknown,
                             "Write specs with peakproof run (or RunSpec.dump).")
        doc["target_pids"] = tuple(doc.get("target_pids") or ())
        return cls(**doc)

    @classmethod
    def load(cls, path: str | Path | None) -> "RunFacts":
        """The facts beside the request in a stage's file (none for no file, or a file without them)."""
        if not path:
            return cls()
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UsageError("--spec", "a run spec file (JSON) written by peakproof run", str(path), str(e)) from None
        return cls.from_json(doc.get(FACTS) if isinstance(doc, dict) else None)


@dataclass
class StageResult:
    """What one stage of a run concluded, judged once, where its checks ran."""

    stage: str
    outcome: str  # "PASS" | "FAIL" | "INCONCLUSIVE"
    reasons: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)  # CheckResult.to_json()
    detail: str = ""
    report: str | None = None  # the HTML report, if the stage wrote one
    data: dict[str, Any] = field(default_factory=dict)  # the stage's own figures (counts, calibration steps)

    def dump(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(json.dumps(asdict(self), indent=1, default=str), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> "StageResult":
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(**doc)
