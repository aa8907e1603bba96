"""The contract stage: a case's OpenAPI checked by a peer tool, Schemathesis.

Schemathesis derives valid and invalid requests, boundary values and stateful chains (the
contract's links) from the schema and judges every answer against it, with every check it
has (server errors, status codes, content types, headers, response schemas, negative data
refused, positive data accepted, 405 with ``Allow``, use after free, ...). What only we know
(the invariants) stays in the properties; this stage asks whether the target and its contract
agree. It runs in process against a reference's ASGI app, or over HTTP against any URL.

Not every disagreement is a broken promise. Each finding is judged (:func:`judge_finding`):

* **allowed by HTTP**, dropped: ``501 Not Implemented`` to a method the server does not
  implement (RFC 9110 15.6.2; 405 is for a method known but not allowed on that resource) is
  neither a server error nor the wrong answer to an undeclared method;
* a **note**, shown with its ``curl`` but not a FAIL of the design, of two kinds:

  - *stricter*: a 4xx to a request the contract allows (a stricter parser than JSON Schema's:
    ``7.0`` refused as an integer, an id with NUL or a lone surrogate that PostgreSQL text cannot
    hold, an extra field refused; ``positive_data_acceptance``, ST202);
  - *more lenient*: a 2xx or 3xx to a request outside the contract (a quota capacity above its
    maximum, ``cursor=`` taken as no cursor, an empty e-mail address kept, an id longer than its
    ``maxLength``; ``negative_data_rejection``, ST201). A client that keeps to the contract is
    served as it states; no promise of the design states that bound.

  The design's own checks judge what buyers send (a quantity of 0 or -1 accepted FAILs the tickets
  property ``invalid_requests_refused``, whatever this stage says); ``--strict-contract`` makes
  every note a finding;
* a **finding** otherwise: a 5xx, an answer off the contract's shape, a documented header missing,
  a status the contract does not list for a request it allows, a 4xx to a request outside the
  contract with a status Schemathesis does not take as a refusal, ...

A refusal a contract documents for valid requests in some states (409 sold out, 422 a request
id reused for another request) is stated in the schema itself, on the operation:
``x-peakproof-valid-refusals: [409, 422]``; the positive-data check then accepts those statuses
there, and only there. A user's own OpenAPI can say the same of its operations.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checks import CheckResult

if TYPE_CHECKING:
    from .case import Case
    from .spec import RunSpec

PHASES = ("examples", "coverage", "fuzzing", "stateful")
# Statuses Schemathesis's positive-data check accepts by default; an operation's stated refusals add to them.
DEFAULT_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
REFUSALS_KEY = "x-peakproof-valid-refusals"
IN_PROCESS_HOST = "http://testserver"  # where Schemathesis's ASGI transport sends an in-process request
ANSWER_CHARS = 400


@dataclass(frozen=True)
class ContractFinding:
    """One way the target and its contract disagree: what was sent, what came back, how to replay it."""

    operation: str  # "POST /quotas/{quota_id}/reservations"
    check: str  # Schemathesis's check, e.g. "positive_data_acceptance"
    code: str  # its failure code, e.g. "ST202"
    title: str  # "Schema-valid request rejected"
    message: str
    status: int | None
    answer: str  # the answer's body, cut to ANSWER_CHARS
    curl: str
    phase: str

    def text(self) -> str:
        status = f"[{self.status}] " if self.status is not None else ""
        message = " ".join(self.message.split())
        return (f"{self.operation}: {self.code} {self.title} ({self.check}, {self.phase} phase)"
                + (f": {message}" if message else "") + f"\n    answer: {status}{self.answer}\n    reproduce: {self.curl}")


@dataclass
class ContractResult:
    """What the stage found: a PASS needs test cases, no finding and no error."""

    case: str
    source: str  # where the OpenAPI came from
    target: str  # the URL, or "in process (ASGI)"
    seed: int | None = None
    phases: dict[str, str] = field(default_factory=dict)  # phase -> success / failure / skip (why)
    operations: int = 0
    test_cases: int = 0
    checks_run: dict[str, int] = field(default_factory=dict)  # check -> test cases it judged
    findings: list[ContractFinding] = field(default_factory=list)
    notes: list[ContractFinding] = field(default_factory=list)  # disagreements that break no promise of the design
    allowed: int = 0  # answers HTTP allows that Schemathesis flagged (501 to an unimplemented method), dropped
    strict: bool = False  # --strict-contract: the notes fail too
    errors: list[str] = field(default_factory=list)  # what stopped Schemathesis testing something
    skipped: str | None = None  # why the stage did not run at all
    unchecked: list[str] = field(default_factory=list)  # what it was not asked to check, and why
    elapsed: float = 0.0

    @property
    def failing(self) -> list[ContractFinding]:
        """What FAILs the stage: the findings, and under --strict-contract the notes too."""
        return self.findings + (self.notes if self.strict else [])

    @property
    def outcome(self) -> str:
        if self.failing:
            return "FAIL"
        if self.skipped or self.errors or not self.test_cases:
            return "INCONCLUSIVE"
        return "PASS"

    def judged_phases(self) -> dict[str, str]:
        """Each phase's status as judged here: Schemathesis says "failure" for a phase where it flagged
        anything, notes and answers HTTP allows included; a phase with no failing finding passed."""
        failing = {f.phase for f in self.failing}
        return {name: (status if status != "failure" or name in failing
                       else "success (only notes or answers HTTP allows)") for name, status in self.phases.items()}

    def headline(self) -> str:
        if self.skipped:
            return f"contract (Schemathesis): skipped: {self.skipped}"
        phases = ", ".join(f"{name} {status}" for name, status in self.judged_phases().items()) or "none"
        notes = f", {len(self.notes)} note(s){' (failing: --strict-contract)' if self.strict else ''}" if self.notes else ""
        allowed = f", {self.allowed} answer(s) HTTP allows not counted (501 to an unimplemented method)" \
            if self.allowed else ""
        return (f"contract (Schemathesis): {self.outcome}: {len(self.findings)} finding(s){notes}{allowed}, "
                f"{self.test_cases:,} test "
                f"cases over {self.operations} operations, {len(self.errors)} error(s); phases: {phases}; "
                f"seed {self.seed}; {self.source} against {self.target}; {self.elapsed:.1f} s"
                + (f"; not checked: {', '.join(self.unchecked)}" if self.unchecked else ""))

    def reasons(self) -> list[str]:
        out = [f"contract: {f.text()}" for f in self.findings]
        out += [f"contract note{' (failing: --strict-contract)' if self.strict else ''}: {f.text()}\n    why a note: "
                f"{note_why(f)}" for f in self.notes]
        out += [f"contract: Schemathesis could not test: {e}" for e in self.errors]
        if self.skipped:
            out.append(f"contract: skipped: {self.skipped}")
        elif not self.test_cases and not self.errors:
            out.append("contract: Schemathesis generated no test case (no operation in the schema?)")
        return out

    def report(self) -> str:
        return "\n".join([self.headline(), *("  " + r.replace("\n", "\n  ") for r in self.reasons())])

    def as_checks(self) -> list[CheckResult]:
        """One result per Schemathesis check, for the verdict and the HTML report."""
        if self.skipped or not self.checks_run:
            return []
        out = []
        for name, judged in sorted(self.checks_run.items()):
            mine = [f for f in self.failing if f.check == name]
            out.append(CheckResult(
                f"contract: {name}", False if mine else True, {"violations": len(mine)},
                first_violation=mine[0].text() if mine else None, examples=[f.text() for f in mine[:5]],
                chances=judged, chance_kind="test cases"))
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ContractResult":
        d = {k: v for k, v in d.items() if k != "outcome"}
        d["findings"] = [ContractFinding(**f) for f in d.get("findings", [])]
        d["notes"] = [ContractFinding(**f) for f in d.get("notes", [])]
        return cls(**d)


NOTE_WHY = ("a request the contract allows was refused with a 4xx: a stricter parser than the contract's (an "
            "integral float, an id with NUL or a lone surrogate, an extra field) breaks no promise of the design; "
            "the design's own checks judge the requests buyers send. --strict-contract fails it")
LENIENT_WHY = ("the server accepted a request outside the contract (a bound, a format or a required field it does "
               "not enforce): a client that keeps to the contract is served as it states, and no promise of the "
               "design states that bound; the design's own checks (e.g. invalid_requests_refused) judge what "
               "buyers send. --strict-contract fails it")
LENIENT_CHECK = "negative_data_rejection"  # Schemathesis's ST201: a schema-violating request accepted


def note_why(note: ContractFinding) -> str:
    """Why a note breaks no promise of the design: a more lenient server than the contract, or a stricter one."""
    return LENIENT_WHY if note.check == LENIENT_CHECK else NOTE_WHY


def judge_finding(check: str, status: int | None, method: str | None, documented: set[str]) -> str:
    """"allowed" (HTTP allows this answer: not a finding), "note" (no promise of the design broken) or
    "finding". ``method``: the request's; ``documented``: the methods the contract lists on its path."""
    if status == 501 and method is not None and method.upper() not in documented \
            and check in ("unsupported_method", "not_a_server_error", "status_code_conformance",
                          "content_type_conformance", "response_headers_conformance"):
        return "allowed"  # RFC 9110 15.6.2: the server does not implement the method at all
    if check == "positive_data_acceptance" and status is not None and 400 <= status < 500:
        return "note"  # stricter than the contract: a request it allows refused
    if check == LENIENT_CHECK and status is not None and 200 <= status < 400:
        return "note"  # more lenient than the contract: a request outside it accepted
    return "finding"


def accepted_statuses(schema: dict[str, Any]) -> dict[str, list[str]]:
    """operationId -> the statuses the positive-data check accepts there (the stated refusals added)."""
    out: dict[str, list[str]] = {}
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            if isinstance(op, dict) and op.get(REFUSALS_KEY) and op.get("operationId"):
                stated = [str(s) for s in op[REFUSALS_KEY]]
                out[op["operationId"]] = DEFAULT_ACCEPTED + [s for s in dict.fromkeys(stated) if s not in DEFAULT_ACCEPTED]
    return out


def load_openapi(source: str | Path) -> dict[str, Any]:
    """The schema at a URL or in a file, as a dict; a clear error when it is neither."""
    from .errors import UsageError

    text = str(source)
    try:
        if text.startswith(("http://", "https://")):
            import requests

            r = requests.get(text, timeout=10)
            r.raise_for_status()
            doc = r.json()
        else:
            doc = json.loads(Path(text).read_text(encoding="utf-8")) if not text.endswith((".yaml", ".yml")) \
                else _yaml(Path(text))
    except Exception as e:  # noqa: BLE001 - every way of not getting a schema is the same usage error
        raise UsageError("--openapi", "an OpenAPI document (JSON or YAML) at a URL or in a file", text,
                         f"It could not be read ({type(e).__name__}: {str(e)[:200]}): give a URL that serves "
                         "the schema, or the path of its JSON or YAML file.") from None
    if not isinstance(doc, dict) or "paths" not in doc:
        raise UsageError("--openapi", "an OpenAPI document with 'paths'", text,
                         "It has no 'paths': is it the API's schema (openapi.json), not another document?")
    return doc


def _yaml(path: Path) -> Any:
    import yaml  # Schemathesis depends on PyYAML

    return yaml.safe_load(path.read_text(encoding="utf-8"))


def run_contract(case: str, schema: dict[str, Any], *, app: Any = None, base_url: str | None = None,
                 source: str = "", headers: dict[str, str] | None = None, max_examples: int = 40,
                 excluded: tuple[str, ...] = (),
                 seed: int | None = None, phases: tuple[str, ...] = PHASES, request_timeout: float = 10.0,
                 max_time: int = 300) -> ContractResult:
    """Run every Schemathesis check, every phase, against ``app`` (in process) or ``base_url``.

    Bounded: ``max_examples`` per operation, one worker, ``request_timeout`` a request and
    ``max_time`` seconds in all. A target that refuses connections or times out is an error of
    the result (INCONCLUSIVE), a 5xx a finding (FAIL); neither raises."""
    import random

    import schemathesis
    from schemathesis.config import SchemathesisConfig
    from schemathesis.engine import events, from_schema

    seed = random.randrange(1 << 32) if seed is None else seed
    t0 = time.monotonic()
    result = ContractResult(case, source or ("the reference's own" if app is not None else "?"),
                            "in process (ASGI)" if app is not None else str(base_url), seed=seed)
    refusals = accepted_statuses(schema)
    config = SchemathesisConfig.from_dict({"operations": [
        {"include-operation-id": oid, "checks": {"positive_data_acceptance": {"expected-statuses": statuses}}}
        for oid, statuses in refusals.items()]})
    # Not Schemathesis's max_time: with one, fuzzing and stateful testing repeat until it is spent.
    # The bound is ours: the stream is stopped once max_time has passed.
    config.update(color=False, suppress_health_check=None, wait_for_schema=None, max_failures=None,
                  max_time=None, seed=seed)
    project = config.projects.override
    # Every test case of a scenario, after a failure too: Schemathesis stops at the first failure by default, and a
    # note or an answer HTTP allows (a 501 to TRACE, first of a coverage run) hid what came after it, findings too
    project.update(headers=headers or None, workers=1, request_timeout=request_timeout, continue_on_failure=True,
                   base_url=None if app is not None else base_url)
    project.phases.update(phases=list(phases))
    project.checks.update(included_check_names=["all"], excluded_check_names=list(excluded) or None)
    project.generation.update(max_examples=max_examples, database="none")
    try:
        if app is not None:  # requests go to the ASGI app, in this process: no socket, no server
            loaded = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
        else:
            loaded = schemathesis.openapi.from_dict(schema, config=config)
        stream = from_schema(loaded).execute()
    except Exception as e:  # noqa: BLE001 - a schema Schemathesis cannot read is a finding about the contract
        result.errors.append(f"the schema could not be loaded: {type(e).__name__}: {e}")
        result.elapsed = time.monotonic() - t0
        return result
    seen: set[tuple[str, str, str, int | None]] = set()
    documented = {path: {m.upper() for m in ops if isinstance(ops.get(m), dict)}
                  for path, ops in schema.get("paths", {}).items()}
    errors: dict[str, int] = {}  # each error once, with how often it came
    deadline = t0 + max_time
    for event in stream:
        if time.monotonic() > deadline and not isinstance(event, events.EngineFinished):
            stream.stop()
            result.errors.append(f"the stage passed its bound of {max_time} s and was stopped (a slow target?)")
            break
        if isinstance(event, events.ScenarioFinished):
            _read_scenario(event, result, seen, app is not None, base_url, documented)
        elif isinstance(event, events.PhaseFinished):
            name = event.phase.name.value if hasattr(event.phase.name, "value") else str(event.phase.name)
            if name in PHASES:
                why = event.phase.skip_reason
                status = str(event.status.value if hasattr(event.status, "value") else event.status)
                result.phases[name] = status + (f" ({why.value if hasattr(why, 'value') else why})"
                                                if status == "skip" and why else "")
        elif isinstance(event, events.NonFatalError):
            text = f"{event.label}: {event.info.title}: {_one_line(event.info.message)}"
            errors[text] = errors.get(text, 0) + 1
        elif isinstance(event, events.FatalError):
            text = f"{type(event.exception).__name__}: {_one_line(str(event.exception))}"
            errors[text] = errors.get(text, 0) + 1
        elif isinstance(event, events.EngineFinished):
            stop = getattr(event, "stop_reason", None)
            if stop is not None and str(getattr(stop, "value", stop)) not in ("completed",):
                result.errors.append(f"Schemathesis stopped early: {getattr(stop, 'value', stop)}")
    result.errors += [text + (f" ({n} times)" if n > 1 else "") for text, n in errors.items()]
    result.operations = sum(1 for ops in schema.get("paths", {}).values() for m in ops
                            if m in ("get", "put", "post", "delete", "patch", "head", "options"))
    result.elapsed = time.monotonic() - t0
    return result


def _read_scenario(event: Any, result: ContractResult, seen: set[tuple[str, str, str, int | None]],
                   in_process: bool, base_url: str | None, documented: dict[str, set[str]]) -> None:
    rec = event.recorder
    result.test_cases += len(rec.cases)
    for case_id, nodes in rec.checks.items():
        for node in nodes:
            result.checks_run[node.name] = result.checks_run.get(node.name, 0) + 1
            info = node.failure_info
            if info is None:
                continue
            failure = info.failure
            response = rec.find_response(case_id=case_id)
            status = getattr(response, "status_code", None)
            operation = getattr(failure, "operation", None) or rec.label
            method = _method_of(rec, case_id, info.code_sample)
            kind = judge_finding(node.name, status, method, documented.get(operation.partition(" ")[2], set()))
            if kind == "allowed":
                result.allowed += 1
                continue
            key = (operation, node.name, failure.title, status)
            if key in seen:
                continue
            seen.add(key)
            curl = info.code_sample
            if in_process:  # the ASGI transport's host: say where a served reference would be
                curl = curl.replace(IN_PROCESS_HOST, "http://127.0.0.1:8000") + "  # against `peakproof serve " + \
                    result.case + "`"
            (result.notes if kind == "note" else result.findings).append(ContractFinding(
                operation=operation, check=node.name, code=str(getattr(failure, "code", "") or ""),
                title=failure.title, message=_one_line(getattr(failure, "message", "") or ""), status=status,
                answer=_answer(response), curl=curl, phase=str(getattr(event.phase, "value", event.phase))))


def _method_of(rec: Any, case_id: Any, curl: str) -> str | None:
    """The request's method: from the recorded case, else from its curl (``curl -X METHOD``)."""
    node = getattr(rec, "cases", {}).get(case_id)
    method = getattr(getattr(node, "value", None), "method", None)
    if method:
        return str(method)
    words = curl.split()
    return words[words.index("-X") + 1] if "-X" in words[:-1] else None


def _answer(response: Any) -> str:
    if response is None:
        return "(no answer)"
    try:
        body = response.content.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001
        body = repr(getattr(response, "content", b""))
    body = " ".join(body.split())
    return body[:ANSWER_CHARS] + ("..." if len(body) > ANSWER_CHARS else "")


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text[:600] + ("..." if len(text) > 600 else "")


def contract_stage(case: "Case", spec: "RunSpec", work: Path, *, max_examples: int = 40,
                   seed: int | None = None) -> ContractResult:
    """The stage for a run: the reference in process (no URL), or the URL against the case's contract,
    or against ``spec.openapi``; a user's driver speaks its own API, so without ``--openapi`` the stage
    is skipped (and says so)."""
    own = case.contract_file()
    source = spec.openapi
    if spec.target_url and spec.driver and not source:
        return ContractResult(case.name, "-", spec.target_url, skipped=(
            "--driver speaks your own API, and no OpenAPI of it was given: pass --openapi URL|FILE (your API's "
            "schema) to have Schemathesis check your service against it"))
    if not source and own is None:
        return ContractResult(case.name, "-", spec.target_url or "in process",
                              skipped=f"the {case.name} case has no OpenAPI contract; pass --openapi URL|FILE")
    schema = load_openapi(source) if source else json.loads(own.read_text(encoding="utf-8"))  # type: ignore[union-attr]
    label = source or f"the {case.name} contract ({own.name})"  # type: ignore[union-attr]
    if not spec.target_url:
        if case.contract_app is None:
            return ContractResult(case.name, label, "in process",
                                  skipped=f"the {case.name} case has no reference app to check in process")
        app, headers, stop = case.contract_app(work)
        try:
            result = run_contract(case.name, schema, app=app, headers=headers, source=label,
                                  max_examples=max_examples, seed=seed)
            result.strict = spec.strict_contract
            return result
        finally:
            stop()
    headers = {"Authorization": f"Bearer {spec.admin_token}"} if spec.admin_token else {}
    unchecked = []
    if not spec.admin_token and _has_security(schema):
        # No token given: the admin operations are sent without one, and whether the target refuses
        # requests without credentials is not asked (a staging server may run with auth off).
        schema, unchecked = without_security(schema), ["authentication (no --admin-token given)"]
    result = run_contract(case.name, schema, base_url=spec.target_url, headers=headers, source=label,
                          max_examples=max_examples, seed=seed, request_timeout=spec.request_timeout,
                          excluded=("ignored_auth",) if unchecked else ())
    result.unchecked += unchecked
    result.strict = spec.strict_contract
    return result


def _has_security(schema: dict[str, Any]) -> bool:
    return bool(schema.get("security")) or any(
        isinstance(op, dict) and op.get("security") for ops in schema.get("paths", {}).values() for op in ops.values())


def without_security(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its security requirements dropped (a copy)."""
    import copy

    out = copy.deepcopy(schema)
    out.pop("security", None)
    for ops in out.get("paths", {}).values():
        for op in ops.values():
            if isinstance(op, dict):
                op.pop("security", None)
    return out


def schemathesis_toml(contracts: dict[str, dict[str, Any]]) -> str:
    """``schemathesis.toml`` for Schemathesis's own CLI: each contract's stated refusals, per operation,
    so that ``st run`` judges a reference as this stage does (the project root's copy is this text)."""
    lines = ["# Schemathesis's own CLI (`st run`) reads this from the directory it runs in: the refusals each of our",
             "# contracts allows for valid requests in some states (x-peakproof-valid-refusals in the OpenAPI), so",
             "# `st run http://127.0.0.1:8000/openapi.json --url http://127.0.0.1:8000/<case> --checks all` judges",
             "# the references as peakproof's contract stage does. Written by peakproof.contract.schemathesis_toml;",
             "# tests/served/test_contract.py fails when it drifts from targets/*/openapi.json.", ""]
    for case, schema in contracts.items():
        for oid, statuses in accepted_statuses(schema).items():
            lines += ["[[operations]]", f'include-operation-id = "{oid}"  # {case}',
                      "checks.positive_data_acceptance.expected-statuses = ["
                      + ", ".join(f'"{s}"' for s in statuses) + "]", ""]
    return "\n".join(lines).rstrip() + "\n"
