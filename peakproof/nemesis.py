"""Faults as data (Jepsen's nemesis): the start and end of every fault the harness injects are
operations in the history, with their parameters, so a check can line an anomaly up with the
fault in force and a report can draw each fault's window on its charts.

A fault op has the process :data:`NEMESIS`, ``f`` ``fault_start`` or ``fault_end`` and args
``{"fault": name, **parameters}``; it completes ok once the fault is in force (or lifted).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .history import FAIL, OK, History, Op

NEMESIS = "nemesis"
ALL = "all"  # lift(history, ALL, ...) ends every fault in force


def inject(history: History, fault: str, apply: Callable[[], bool], **params: Any) -> Op:
    """Record the start of ``fault`` and put it in force with ``apply()`` (True: it took)."""
    return _record(history, "fault_start", fault, apply, params)


def lift(history: History, fault: str, apply: Callable[[], bool], **params: Any) -> Op:
    """Record the end of ``fault`` and lift it with ``apply()``."""
    return _record(history, "fault_end", fault, apply, params)


def _record(history: History, f: str, fault: str, apply: Callable[[], bool], params: dict[str, Any]) -> Op:
    op = history.invoke(NEMESIS, f, {"fault": fault, **params})
    try:
        took = apply()
    except Exception as e:  # the fault could not be put in force: the history says so, the run goes on
        return history.complete(op, FAIL, "nemesis_error", f"{type(e).__name__}: {e}")
    return history.complete(op, OK if took else FAIL, None if took else "not_applied")


def windows(ops: Iterable[Op], t0: float = 0.0) -> list[dict[str, Any]]:
    """Each fault's window: {fault, params, start, end (None: still in force)} in seconds from ``t0``.

    A fault ends at the next ``fault_end`` of the same name and parameters, or of the same
    name with no parameters (lifting every instance), or of :data:`ALL`, or at a later start of the same name
    and parameters (a fault re-configured)."""
    out: list[dict[str, Any]] = []
    open_: dict[tuple[str, str], dict[str, Any]] = {}
    for op in sorted((o for o in ops if o.process == NEMESIS and o.type == OK), key=lambda o: o.complete_seq):
        fault = op.args["fault"]
        params = {k: v for k, v in op.args.items() if k != "fault"}
        key = (fault, repr(sorted(params.items())))
        at = op.complete_time - t0
        if op.f == "fault_start":
            if key in open_:
                open_.pop(key)["end"] = at
            w = {"fault": fault, "params": params, "start": at, "end": None}
            open_[key] = w
            out.append(w)
        else:
            for k in [k for k in open_ if k == key or (k[0] == fault and not params) or fault == ALL]:
                open_.pop(k)["end"] = at
    return out
