"""The case registry, built from the case packages: nothing else lists the cases.

One package per case, each with the same modules in the same roles:

* ``case.py``: its :class:`~peakproof.case.Case` record (``CASE``): policies, scenarios,
  options, how its reference is served, its peak (from its ported model);
* ``driver.py``: the case's driver ``Protocol``, its in-process driver (on
  :class:`peakproof.driver.InProcessDriver`) and its HTTP driver (on
  :class:`peakproof.driver.HttpDriver`);
* ``workload.py``: the seed's workload as a class with ``describe()``;
* ``analysis.py``: the analysis type (one pass over a history) and the registry its checks join;
* promise modules over it (each check registered where it is written) and ``checks.py``, which
  imports them and assembles the list and ``check_<case>``;
* ``report.py`` (where a load has charts of its own): history to checks, charts and details, pure.

Each package's ``__init__`` re-exports them and names ``CASE``, ``PROTOCOL``, ``IN_PROCESS``
and ``OVER_HTTP``. The registry holds the packages found here, then those named in
``PEAKPROOF_CASES`` (comma-separated importable packages: a case that lives in its own
folder), then those of the ``peakproof.cases`` entry point group (an installed plugin).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from typing import TYPE_CHECKING

from dataclasses import replace
from pathlib import Path

from ..case import CaseDrivers
from ..errors import UsageError
from ..options import SHARED, Option
from ..spec import RunFacts, RunSpec

if TYPE_CHECKING:
    from ..case import Case
    from ..run import Run

_REGISTRY: dict[str, "Case"] = {}
_FROM: list[str] = []  # the PEAKPROOF_CASES the registry was built with


def _packages() -> list[str]:
    names = [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.ispkg]
    names += [n.strip() for n in os.environ.get("PEAKPROOF_CASES", "").split(",") if n.strip()]
    try:
        from importlib.metadata import entry_points

        names += [ep.value for ep in entry_points(group="peakproof.cases")]
    except Exception:  # noqa: BLE001 - no metadata: the built-in cases and PEAKPROOF_CASES still count
        pass
    return names


def all_cases() -> dict[str, "Case"]:
    """Every registered case by name, in the order found (built-in first)."""
    env = os.environ.get("PEAKPROOF_CASES", "")
    if _REGISTRY and _FROM == [env]:
        return _REGISTRY
    _REGISTRY.clear()
    for name in _packages():
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            raise UsageError("PEAKPROOF_CASES", "importable case packages (each with a CASE)", name,
                             f"Importing it said: {e}. Put its folder on PYTHONPATH.") from None
        case = getattr(module, "CASE", None)
        if case is None:
            raise UsageError(f"case package {name}", "a CASE = peakproof.case.Case(...) in its __init__", None)
        try:
            case = replace(case, drivers=CaseDrivers(module.PROTOCOL, module.IN_PROCESS, module.OVER_HTTP),
                           folder=Path(module.__file__ or ".").parent)
        except AttributeError as e:
            raise UsageError(f"case package {name}", "PROTOCOL, IN_PROCESS and OVER_HTTP named in its __init__ "
                             "(its driver protocol and its two drivers)", None, f"{e}.") from None
        if case.name in _REGISTRY and _REGISTRY[case.name].package != case.package:
            raise UsageError(f"case package {name}", f"a case name not taken ({case.name!r} is "
                             f"{_REGISTRY[case.name].package}'s)", case.name)
        _REGISTRY[case.name] = case
    ordered = sorted(_REGISTRY.values(), key=lambda c: c.rank)  # stable: found order within a rank
    _REGISTRY.clear()
    _REGISTRY.update((c.name, c) for c in ordered)
    _FROM[:] = [env]
    return _REGISTRY


def case_names() -> list[str]:
    return list(all_cases())


def get_case(name: str) -> "Case":
    cases = all_cases()
    if name not in cases:
        raise UsageError("case", "one of " + ", ".join(cases), name,
                         "A case of your own: name its package in PEAKPROOF_CASES.")
    return cases[name]


def run_of(spec: RunSpec, facts: "RunFacts | None" = None) -> "Run":
    """The run record of ``spec`` (and the ``facts`` a parent run passed beside it): its case found by
    name and its driver resolved, here and only here (each process's entry point calls this once; see
    :mod:`peakproof.run`)."""
    from ..run import Run

    return Run.of(spec, get_case(spec.case), facts)


def all_options() -> list[Option]:
    """The shared options, then every registered case's own."""
    out = {o.name: o for o in SHARED}
    for case in all_cases().values():
        for o in case.options:
            # Two cases may share an option (a case copied from another, the providers' URL): one flag, added
            # once; the same name for another flag is the registry's error, said with both.
            if o.name in out and out[o.name].cli_flag != o.cli_flag:
                raise UsageError(f"case {case.name}'s option {o.name}", f"the flag {out[o.name].cli_flag} another "
                                 "case gave that name, or a name of its own", o.cli_flag)
            out.setdefault(o.name, o)
    return list(out.values())


def option(name: str) -> Option:
    for o in all_options():
        if o.name == name:
            return o
    raise KeyError(name)
