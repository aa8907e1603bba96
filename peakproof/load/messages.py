"""What a master and its workers say to each other: the plan (the spec, the scenario's shared
setup, the schedule's start), each worker's history in chunks, and its counters when done.

Pure functions of an engine's state and a message's data: the listeners are in
:mod:`peakproof.load.engine`.
"""

from __future__ import annotations

from typing import Any

from ..history import op_to_wire

PLAN, OPS, DONE = "peakproof_plan", "peakproof_ops", "peakproof_done"
CHUNK = 5000  # ops a message


def plan(count: int, shared: dict[str, Any], t0: float, spec: Any | None = None, host: str | None = None,
         facts: Any | None = None) -> dict:
    """The master's plan: ``count`` workers split the schedule; ``spec`` (as JSON) says what to run, with
    what the run learned (``facts``, its RunFacts) beside it."""
    out: dict[str, Any] = {"count": count, "shared": shared, "t0": t0}
    if spec is not None:
        out.update(spec=spec.to_json(), host=host, facts=facts.to_json() if facts is not None else None)
    return out


def send_history(runner: Any, ops: list[Any], counters: dict[str, int], harness_errors: list[str],
                 dropped_by_second: dict[int, int]) -> None:
    wire = [op_to_wire(op) for op in ops]
    for start in range(0, len(wire), CHUNK):
        runner.send_message(OPS, {"ops": wire[start:start + CHUNK]})
    runner.send_message(DONE, {"counters": counters, "harness_errors": harness_errors,
                               "dropped_by_second": {str(k): v for k, v in dropped_by_second.items()}})


def merge_done(data: dict[str, Any], counters: dict[str, int], dropped_by_second: dict[int, int],
               harness_errors: list[str]) -> None:
    """Add a worker's final counters to the master's (maxima stay maxima)."""
    for k, v in data["counters"].items():
        counters[k] = max(counters.get(k, 0), v) if k.endswith("_max") else counters.get(k, 0) + v
    for sec, v in data["dropped_by_second"].items():
        dropped_by_second[int(sec)] = dropped_by_second.get(int(sec), 0) + v
    harness_errors.extend(data.get("harness_errors", []))
