"""The counter case's record: how it is served, loaded and judged (see :class:`peakproof.case.Case`).

It lives outside ``peakproof/``: registered by ``PEAKPROOF_CASES=counter_case`` with this
folder's parent on ``PYTHONPATH``; nothing shared names it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from peakproof.case import Case
from peakproof.options import LOAD, PYTEST, SERVE, Option, non_negative, positive
from peakproof.spec import RunSpec

HERE = Path(__file__).resolve().parents[1]  # tests/fourth_case: the locustfile and the properties
PEAK_RATE = 200.0  # increments/s at --scale 1: small, so a run is cheap on any machine


def peak_rate() -> float:
    return PEAK_RATE


def serve(args: argparse.Namespace, db: Path, policy: str) -> None:
    """Serve the reference counter until interrupted (in memory: ``db`` is not used)."""
    from .app import serve_counter

    serve_counter(args.host, args.port, policy, args.http, args.counter_racy_pause)


def served_options(spec: RunSpec) -> dict[str, object]:
    return {"counter_racy_pause": spec.opt("counter_racy_pause")}


OPTIONS = (
    Option("counter_max_by", "the counter load's largest increment (each is drawn from 1..N)", LOAD | {PYTEST},
           default=5, kind=positive(int)),
    Option("counter_racy_pause", "s the racy counter waits between an increment's snapshot and its write",
           LOAD | {SERVE}, default=0.001, kind=non_negative(float)),
)

CASE = Case(
    "counter", "/counter", "Case C (throwaway): a counter that must count every increment", "counter_case",
    ("locked", "racy"), ("counter-peak",), calibration="", peak_rate=peak_rate, default_scale=1.0,
    max_auto_scale=1.0, default_time_scale=1.0, default_duration=5.0, options=OPTIONS,
    served_options=served_options, serve=serve, loadtest=str(HERE / "counter_load.py"),
    properties=str(HERE / "props_counter.py"), rank=300)
