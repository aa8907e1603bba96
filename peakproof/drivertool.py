"""``peakproof driver new CASE`` (a commented skeleton) and ``peakproof driver check CASE`` (each
operation and capability once against the target, and how the harness classified each answer).

A case's ``checkup`` module (``peakproof/cases/<case>/checkup.py``) gives the names under
which its operations record their arguments (``ARGS``: the checks read them), what each value
must hold (``VALUES``), and ``steps(driver, spec)``: the calls of the check, in order.
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterable

from .capabilities import offers
from .case import Case, CaseDrivers
from .driver import operations
from .errors import UsageError
from .history import OK, Op
from .run import Run


def _drivers(case: Case) -> CaseDrivers:
    if case.drivers is None:
        raise UsageError(f"case {case.name}", "a case read by the registry (its package's drivers)", None)
    return case.drivers


def checkup(case: Case) -> Any:
    """The case's ``checkup`` module (its ``OPERATIONS`` table and ``steps``); a case without one
    is a usage error naming the module to write."""
    package = case.package
    try:
        return importlib.import_module(f"{package}.checkup")
    except ModuleNotFoundError as e:
        if e.name != f"{package}.checkup":
            raise
        raise UsageError("case", f"a case with a {package}.checkup module (OPERATIONS, steps)", case.name,
                         "driver new / check / docs read its operations from it: see peakproof/cases/tickets/"
                         "checkup.py") from None


def recorded_right(op: Op | None, args: dict[str, tuple[str, ...]], values: dict[str, tuple[str, ...]]) -> list[str]:
    """What is wrong with how ``op`` was recorded: argument names the checks read, value fields."""
    if op is None:
        return []
    problems = []
    want = args.get(op.f)
    if want is None:
        problems.append(f"recorded as {op.f!r}: the checks know operations {', '.join(args)}")
        return problems
    missing = [a for a in want if a not in op.args]
    if missing:
        problems.append(f"its args lack {', '.join(missing)} (record them under these names: the checks read "
                        f"{', '.join(want)}); got {sorted(op.args)}")
    if op.type == OK:
        need = values.get(op.f, ())
        if need and not isinstance(op.value, dict):
            problems.append(f"the value must be a dict with {', '.join(need)}; got {type(op.value).__name__}")
        else:
            lacking = [k for k in need if k not in op.value]
            if lacking:
                problems.append(f"the value lacks {', '.join(lacking)}")
    return problems


def run_check(run: Run, write: Callable[[str], None] = print) -> int:
    """Every operation and capability once; 0 when each answered as the harness needs, else 1."""
    case, spec = run.case, run.spec
    drivers = _drivers(case)
    ck = checkup(case)
    write(f"peakproof driver check {spec.case}: {spec.driver or 'the contract driver'} against {spec.target_url}")
    write(f"  operations: {', '.join(o for o in operations(drivers.protocol) if o not in ('now', 'advance'))}")
    d = run.build_driver()
    for rule, value in run.stated_rules().items():  # what the run's checks will judge by
        write(f"  rule: {rule}: {value}")
    design = run.design()  # the product's own design: what is stated, and what could be (peakproof.design)
    for line in design.lines():
        write(f"  design {line}")
    for s in case.design:
        if s.name not in design.stated:
            write(f"  design not stated: {s.stating(s.metavar or True) if s.kind else s.flag}: if your service "
                  f"{s.says_with(s.metavar or 'VALUE')}, state it"
                  + (f" ({', '.join(s.leaves_out)} then not checked)" if s.leaves_out else "")
                  + "; otherwise what those checks find is a finding")
    for cap in case.capabilities:
        left = f"; undecided without it: {', '.join(cap.checks)}" if cap.checks else ""
        if cap.name in spec.without:
            write(f"  capability {cap.name}: waived (--without {cap.name})" + left.replace("undecided", "waived"))
        elif not cap.methods:
            write(f"  capability {cap.name}: a field of the answers (the calls below show whether it came){left}")
        else:
            have = offers(d, cap, spec)
            by = f" by --{cap.option.replace('_', '-')}" if have and cap.option and spec.opt(cap.option) else ""
            write(f"  capability {cap.name}: {'offered' + by if have else 'NOT offered'} (methods "
                  f"{', '.join(cap.methods)})"
                  + ("" if have else left + (f"; if your service has none: --without {cap.name}" if cap.checks
                                             else "; nothing is left undecided without it")))
    write("")
    bad = 0
    unkept = 0  # steps that answered as the contract allows but showed a promise the service does not keep
    try:
        for step in ck.steps(d, spec, offered=lambda name: offers(d, case.capability(name), spec)):
            step.problems += recorded_right(step.op, ck.ARGS, ck.VALUES)
            for line in step.lines():
                write(line)
            if not (step.holds and not step.problems):
                bad += 1
                answered = step.op is not None and step.op.type == OK and not step.problems
                if step.promise and answered:
                    unkept += 1
                    hint = design.hint(step.promise)
                    write(f"         your service does not keep {step.promise} here: "
                          + (f"{hint}" if hint else "this is a finding (no design statement explains it)"))
    except Exception as e:  # the driver raised: say where, never a traceback alone
        write(f"  [NO ] the driver raised {type(e).__name__}: {e}")
        write("         a driver must return a completed op for every answer (let _call classify it)")
        bad += 1
    write("")
    if bad and bad == unkept:  # the driver reads every answer right: what it showed is the service's design or a bug
        write(f"  every call answered as the harness needs; {unkept} showed a promise your service does not keep: "
              f"state its design (above), or a run will FAIL on it as a finding")
        return 0
    fix = "fix those before a real run" + (f" ({unkept} of them a promise your service does not keep: state its "
                                           f"design, or it is a finding)" if unkept else "")
    write(f"  {'every call answered as the harness needs' if not bad else f'{bad} call(s) did not'}: "
          f"{'ready for peakproof run' if not bad else fix}"
          + (" (a capability not offered leaves its checks undecided: the run says which)" if not bad else ""))
    return 0 if not bad else 1


# -- the skeleton ----------------------------------------------------------------------------


def skeleton(case: Case) -> str:
    """A commented driver for ``case``: every operation, every capability (optional), the
    argument names the checks read, and what each value must hold."""
    case_name, module = case.name, _drivers(case)
    ck = checkup(case)
    cls_name = "My" + case_name.title().replace("_", "")
    ops = [o for o in operations(module.protocol) if o not in ("now", "advance")]
    out = [f'"""A peakproof driver for my {case_name} service (docs/drivers.md says what each method must return).',
           "",
           f"Check it: peakproof driver check {case_name} --driver THIS_FILE.py:{cls_name} --target-url URL",
           f"Run it:   peakproof run {case_name} --driver THIS_FILE.py:{cls_name} --target-url URL",
           '"""', "", "from __future__ import annotations", "", "from typing import Any", "",
           "from peakproof.driver import ErrorMap, HttpDriver, translate",
           "from peakproof.errors import SetupFailed  # raise it when the target refuses a set-up (a finding)",
           "from peakproof.history import Op",
           "from peakproof.timefmt import parse_time  # any ISO 8601 time with a zone -> epoch seconds", "", "",
           f"class {cls_name}(HttpDriver):",
           f'    """My service, as the {case_name} case\'s operations. Built as {cls_name}(base_url, history=...,',
           '    transport=..., timeout=..., admin_token=..., token=...) by the harness (HttpDriver keeps them)."""', "",
           "    # Your error answers as the contract's codes: the code's dotted path in your error body, your",
           "    # codes -> ours, and statuses -> ours where the body names none. Unmapped: the body's code or http_<n>.",
           "    # (A status maps every answer with it: a 404 for an unknown route too.)",
           f"    errors = ErrorMap(field=\"error\", codes={{}}, statuses={ck.STATUS_HINT!r})", "",
           "    # Each operation: self._call(name, args, METHOD, path, body, parser, process=..., intended_time=...)",
           "    # records it in the run's history and returns the completed Op (op.type 'ok' / 'fail' / 'info',",
           "    # op.value). path: under base_url, query string included ('/x?limit=5'); quote ids that may hold",
           "    # '/' or spaces (urllib.parse.quote(id, safe='')). body: a JSON-able object, or None for no body.",
           "    # headers={...}: this request's own (an Idempotency-Key). Auth: admin=True calls carry --admin-token;",
           "    # auth = 'every' puts --token (else --admin-token) on every call; auth_headers(token) is the scheme",
           "    # (Bearer by default). ErrorMap's field may be several paths and walks lists (DRF's nested errors);",
           "    # prefixes={...} / patterns={...} match texts that carry numbers. Several requests for one operation:",
           "    # with self.operation(name, args, process=..., intended_time=...) as op: op.request(...); op.ok(value).",
           "    # Ids your service allocates: self.ids (shared by every instance of this driver in a process).",
           "",
           "    auth = \"admin\"  # or \"every\"",
           "",
           "    def auth_headers(self, token: str) -> dict[str, str]:",
           "        return {\"Authorization\": f\"Bearer {token}\"}  # e.g. f\"Token {token}\", or {\"X-Api-Key\": token}"]
    for name in ops:
        out += _method(module.protocol, name, ck, optional=None)
    for cap in case.capabilities:
        for name in cap.methods:
            out += _method(module.over_http, name, ck, optional=cap)
    out += ["", "", "# The value parsers: your JSON -> the values the checks read ({ours: your field's dotted path, or",
            "# (path, {your word: ours}) / (path, a function) to convert it). A wrong shape raises: the op is info."]
    hints = getattr(ck, "PARSER_HINTS", {})
    for parser, fields in dict((ck.PARSERS[n], ck.VALUES[n]) for n in ck.VALUES).items():
        body = ",\n                           ".join(f'"{f}": {hints.get(parser, {}).get(f, chr(34) + "TODO" + chr(34))}'
                                                   for f in fields)
        out += ["", "", f"def {parser}(doc: Any) -> dict[str, Any]:",
                f"    return translate(doc, {{{body}}})"]
    return "\n".join(out) + "\n"


# the capabilities whose calls a service guards with an admin key (creating a quota, loading a graph, a fault hook)
ADMIN_CAPABILITIES = ("setup", "bulk_graph", "faults")


def _method(source: Any, name: str, ck: Any, optional: Any) -> list[str]:
    head = [""]
    if optional is not None:
        head.append(f"    # optional capability '{optional.name}' ({optional.what}); delete it if your service has none")
    special = getattr(ck, "SKELETON", {}).get(name)
    if special:  # a method that returns no Op (a count, a record): written out whole
        return head + [f"    {line}" if line else "" for line in textwrap.dedent(special).strip("\n").splitlines()]
    fn = getattr(source, name, None)
    try:
        sig = inspect.signature(fn) if fn is not None else None
    except (TypeError, ValueError):
        sig = None
    params = [p for p in (sig.parameters.values() if sig else []) if p.name != "self" and p.kind not in
              (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
    positional = [_param(p) for p in params if p.kind is not p.KEYWORD_ONLY]
    keyword = [_param(p) for p in params if p.kind is p.KEYWORD_ONLY] or ["process: Any = 0"]
    rest = [p.name for p in (sig.parameters.values() if sig else []) if p.kind is inspect.Parameter.VAR_KEYWORD]
    sig_text = ", ".join(["self", *positional, "*", *keyword, *(f"**{r}: Any" for r in rest)])
    names = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
    recorded = ck.ARGS.get(name) or tuple(names)
    args = ", ".join([*(f'"{r}": {n}' for r, n in zip(recorded, names)), *(f"**{r}" for r in rest)])
    doc = ck.DOCS.get(name, "")
    parse = ck.PARSERS.get(name, "lambda doc: doc if isinstance(doc, dict) else {}")
    method = "GET" if name.startswith(("get_", "read")) else "POST"  # a guess: yours may differ
    kw = ", process=process" if "process" in sig_text else ""
    if "intended_time" in sig_text:
        kw += ", intended_time=intended_time"
    if optional is not None and optional.name in ADMIN_CAPABILITIES:  # it carries --admin-token; none given: nothing
        kw += ", admin=True"
        head.append("    # an admin call: admin=True sends --admin-token through auth_headers (none given: no header)")
    defn = f"    def {name}({sig_text}) -> Op:"
    if len(defn) > 110:
        defn = f"    def {name}(" + f",\n{' ' * (9 + len(name))}".join(sig_text.split(", ")) + ") -> Op:"
    return head + [defn,
                   *[f"        {line}" for line in textwrap.wrap(f'"""{doc}"""', 100)],
                   f"        args = {{{args}}}  # the checks read these names",
                   f'        return self._call("{name}", args, "{method}", "/TODO", '
                   f'{"None" if method == "GET" else "{}"}, {parse}{kw})']


def _param(p: inspect.Parameter) -> str:
    ann = p.annotation
    text = p.name
    if ann is not inspect.Parameter.empty:
        text += f": {ann if isinstance(ann, str) else getattr(ann, '__name__', ann)}"
    if p.default is not inspect.Parameter.empty:
        text += f" = {p.default!r}"
    return text


# -- the docs' tables -------------------------------------------------------------------------

BEGIN = "<!-- generated: peakproof driver docs {case}"
END = "<!-- end generated -->"


def operations_doc(case: Case) -> str:
    """The docs' table of ``case``'s operations, from its ``OPERATIONS`` (what each must do and
    return, the names it records) and its protocol (the signatures, which are load operations)."""
    case_name, module = case.name, _drivers(case)
    rows = ["| method | recorded as (the checks read these names) | what it must do | value when ok |",
            "|---|---|---|---|"]
    load = []
    for spec in checkup(case).OPERATIONS:
        source = module.protocol if spec.capability is None else module.over_http
        sig = _signature(source, spec.name)
        if sig is not None and "intended_time" in sig.parameters:
            load.append(spec.name)
        head = f"`{spec.name}({_call_text(sig)})`"
        if spec.capability:
            head = f"capability `{spec.capability}`: {head}"
        recorded = f"`{spec.recorded_as or spec.name}` {{{', '.join(spec.args)}}}" if spec.args else "not recorded"
        rows.append(f"| {head} | {recorded} | {spec.does} | {spec.returns} |")
    marker = BEGIN.format(case=case_name)
    return "\n".join([f"{marker} (from OPERATIONS in {case.package.replace('.', '/')}/checkup.py and the case's "
                      f"protocol): edit there, then peakproof driver docs --write docs/drivers.md -->", *rows, "",
                      "Every method takes keyword `process` (who does it: pass it to `_call`). The load operations "
                      "take `intended_time` too (pass it: latency is measured from the instant the curve asked): "
                      + ", ".join(f"`{n}`" for n in load) + ".", END])


def update_docs(path: str | Path, cases: Iterable[Case]) -> list[str]:
    """Rewrite each case's generated region of ``path`` in place; the cases whose region changed.
    A case whose region is missing is an error naming the marker to add."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    changed = []
    for case in cases:
        name = case.name
        marker = BEGIN.format(case=name)
        start = text.find(marker + " ")
        end = text.find(END, start)
        if start < 0 or end < 0:
            raise ValueError(f"{p} has no region for {name}: expected a line starting {marker!r} and, after it, "
                             f"{END!r}; add the two lines where the table belongs and run this again")
        new = operations_doc(case)
        if text[start:end + len(END)] != new:
            text = text[:start] + new + text[end + len(END):]
            changed.append(name)
    p.write_text(text, encoding="utf-8")
    return changed


def generated_region(text: str, case_name: str) -> str | None:
    """The region of ``case_name`` in a docs text, as written there (None: none)."""
    start = text.find(BEGIN.format(case=case_name) + " ")
    end = text.find(END, start)
    return None if start < 0 or end < 0 else text[start:end + len(END)]


def _signature(source: Any, name: str) -> inspect.Signature | None:
    try:
        return inspect.signature(getattr(source, name))
    except (AttributeError, TypeError, ValueError):
        return None


def _call_text(sig: inspect.Signature | None) -> str:
    """``a, b, c=1, **params``: the arguments a caller gives (``self`` and the keyword-only left out)."""
    if sig is None:
        return "..."
    out = []
    for p in sig.parameters.values():
        if p.name == "self" or p.kind is p.KEYWORD_ONLY:
            continue
        if p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        elif p.kind is not p.VAR_POSITIONAL:
            out.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return ", ".join(out)


__all__ = ["run_check", "skeleton", "recorded_right", "operations_doc", "update_docs", "generated_region"]
