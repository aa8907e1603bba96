"""The run's view of this machine, as ``peakproof run`` prints it: where its processes go
(:func:`placement_for`), what the target is made of here (:func:`target_facts`: the owners of its
listening socket and the components they talk to, peakproof.components), and who used the CPU during a
stage (:func:`tenancy_line`) and whether that changed between the calibration and the load."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .placement import on_loopback
from .spec import RunFacts, RunSpec

if TYPE_CHECKING:
    from .calibrate import CalibrationResult
    from .placement import Placement


def tenancy_line(doc: dict | None) -> str:
    """A stage's CPU by tenant (measured where it was judged: peakproof.tenants), as one line."""
    from .tenants import Tenancy

    if not doc:
        return "the machine's CPU by tenant: not measured"
    t = Tenancy.from_json(doc)
    return f"{t.sentence()}; {t.target_sentence()}"


def conditions_changed(cal: CalibrationResult | None, doc: dict | None) -> str:
    """Whether the load ran on the machine the calibration measured: a neighbour that came or went between them."""
    from .tenants import NEIGHBOUR_CORES, Tenancy

    if not cal or cal.neighbour_cores is None or not doc:
        return ""
    busiest = Tenancy.from_json(doc).busiest()
    if busiest is None:
        return ""
    load = busiest.neighbours / busiest.span
    if load >= NEIGHBOUR_CORES > cal.neighbour_cores:
        return (f"; NOTE: the calibration saw a quiet machine (others took {cal.neighbour_cores:.2f} of a core at most), "
                f"the load did not ({load:.2f} of a core): the rate was sized for a machine the load did not have")
    if cal.neighbour_cores >= NEIGHBOUR_CORES > load:
        return (f"; NOTE: the calibration ran beside a neighbour ({cal.neighbour_cores:.2f} of a core), the load on a "
                f"quiet machine: the rate it sized may be lower than this machine offers")
    return ""


def placement_for(spec: RunSpec, facts: RunFacts, helpers: tuple[str, ...] = ()) -> "Placement":
    """Where this run's generators and target go on this machine's cores (see peakproof.placement)."""
    from .placement import place, usable_cores

    kind = "embedded" if facts.embedded else ("loopback" if spec.target_url and on_loopback(spec.target_url)
                                             else "remote")
    placed = place(usable_cores(), int(spec.processes), kind, helpers)
    if kind == "loopback":
        from dataclasses import replace

        placed = replace(placed, facts=target_facts(spec.target_url or "", spec, facts))
    return placed


def target_facts(url: str, spec: RunSpec | None = None, facts: RunFacts | None = None) -> str:
    """What /proc says of the processes serving a loopback URL: the owners of its listening socket, their
    children and what they talk to (a database, a broker and its workers: peakproof.components), with what
    ``spec`` states (--target-process, --target-cgroup), by pid and name, and the cores they may run on;
    "unknown" where it cannot tell."""
    from .tenants import Tenancy, TenantMeter, affinity

    meter = (TenantMeter.for_spec(spec, facts or RunFacts(), url, os.getpid()) if spec is not None
             else TenantMeter.for_url(url))
    meter.sample()  # one window: the components' processes counted, no figure kept from it
    t = meter.result()
    t = Tenancy(t.cores, target_processes=sorted(meter.target_names.items()),
                target_affinity={p: affinity(p) for p in meter.target_names}, port=meter.port,
                found_by_socket=meter.found_by_socket, components=t.components, shared=t.shared, unseen=t.unseen)
    return t.target_sentence(seen=False)  # nothing ran yet: the cores it may use, not those it used
