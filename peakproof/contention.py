"""Whether a stage's latency and pace were the target's alone: pure judgements of a :class:`Tenancy`
(peakproof.tenants measures it). A stretch of about :data:`WINDOW` seconds in which processes outside the run
took :data:`NEIGHBOUR_CORES` of a core or more while the run's threads waited :data:`RUN_WAIT` of the time for
a CPU is contended; so is a target that waited for a CPU on the cores the harness's own processes used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from .procfs import cores_text

__all__ = ["Window", "contention", "shared_with_the_run", "stretches", "NEIGHBOUR_CORES", "RUN_WAIT", "SATURATED",
           "WINDOW"]

# A window is contended when the neighbours took at least this share of one core...
NEIGHBOUR_CORES = 0.10
# ...while the run's processes (generators and target together) spent at least this share of the
# window's wall time runnable but waiting for a CPU (a quiet 2-core host shows about 0.01)
RUN_WAIT = 0.05
# ...and the harness shares the target's cores only when the machine had no CPU to spare: busy this share of its cores
SATURATED = 0.9
WINDOW = 5.0  # s: the span contention is judged over (a neighbour arriving mid-stage is not averaged away)


@dataclass
class Window:
    """One span between two readings: seconds of CPU by whom, and what the run's threads waited."""

    span: float
    machine: float  # busy CPU-seconds on the usable cores
    run: float  # the run's own processes (generators and whatever else the run started), target excluded
    target: float  # the target's processes on this machine
    waited_run: float
    waited_target: float
    kernel: float = 0.0  # the kernel's own threads (loopback softirqs, writeback): mostly the run's traffic

    @property
    def neighbours(self) -> float:
        return max(0.0, self.machine - self.run - self.target - self.kernel)

    def to_json(self) -> list[float]:
        return [round(x, 4) for x in (self.span, self.machine, self.run, self.target, self.waited_run,
                                      self.waited_target, self.kernel)]

    @classmethod
    def from_json(cls, v: list[float]) -> "Window":
        return cls(*v)


class Tenancy(Protocol):
    """What the judgements read of a stage's tenancy (peakproof.tenants.Tenancy)."""

    cores: int
    windows: list[Window]
    target_processes: list[tuple[int, str]]
    target_affinity: dict[int, tuple[int, ...] | None]
    core_seconds: dict[str, dict[int, float]]

    @property
    def wall(self) -> float: ...

    def share(self, what: str) -> float: ...

    def outside_sentence(self) -> str: ...


def stretches(windows: list[Window], span: float) -> Iterable[Window]:
    """Each run of consecutive windows from each start, summed until it spans ``span`` seconds (or the
    stage, when the stage is shorter)."""
    whole = sum(w.span for w in windows)
    for i in range(len(windows)):
        acc = Window(0, 0, 0, 0, 0, 0, 0)
        for w in windows[i:]:
            acc = Window(*(a + b for a, b in zip(acc.to_json(), w.to_json())))
            if acc.span >= span:
                break
        if acc.span > 0 and acc.span >= min(span, whole) - 1e-6:
            yield acc


def contention(t: Tenancy) -> str | None:
    """Why the stage's latency and pace were not the target's alone, or None: some stretch of about
    :data:`WINDOW` seconds in which processes outside the run took :data:`NEIGHBOUR_CORES` of a core or
    more while the run's own threads waited :data:`RUN_WAIT` of the time or more for a CPU; else the
    harness's own generators on the cores the target ran on (:func:`shared_with_the_run`)."""
    return _neighbour(t) or shared_with_the_run(t)


def shared_with_the_run(t: Tenancy) -> str | None:
    """A target on this machine that ran on a core the run's own threads ran on, and waited for a CPU
    :data:`RUN_WAIT` of some stretch or more while the run used :data:`NEIGHBOUR_CORES` of a core there:
    the harness took CPU the target needed (peakproof pins its generators, not someone else's target), and
    how much of the wait was the harness's and how much the target's own threads' cannot be told apart."""
    # a core the run used a tenth of a core of, over the stage, and the target ran on (a thread of the run that
    # woke once on the target's pinned core shares nothing)
    run_cores = {c for c, x in t.core_seconds.get("run", {}).items() if x >= NEIGHBOUR_CORES * t.wall}
    both = sorted(run_cores & {c for c, x in t.core_seconds.get("target", {}).items() if x > 0})
    if not both or not t.target_processes:
        return None
    worst: Window | None = None
    # A target free to run on every core waited for the harness only when the machine had no CPU to spare: with
    # a core idle, a target of many processes waited for its own threads (a web tier, a database and workers queue
    # behind one another). One held to some cores (its own taskset, a container) may starve beside an idle one.
    allowed = {c for a in t.target_affinity.values() if a for c in a}
    floor = SATURATED * t.cores if allowed and len(allowed) >= t.cores else 0.0
    for acc in stretches(t.windows, WINDOW):
        if acc.run / acc.span >= NEIGHBOUR_CORES and acc.waited_target / acc.span >= RUN_WAIT \
                and acc.machine / acc.span >= floor and (
                worst is None or acc.waited_target / acc.span > worst.waited_target / worst.span):
            worst = acc
    if worst is None:
        return None
    return (f"the target ran on core(s) {cores_text(both)}, where the harness's own processes ran too "
            f"({worst.run / worst.span:.2f} of a core in its worst {worst.span:.0f} s), and its threads waited for a CPU "
            f"{worst.waited_target / worst.span:.0%} of that time (summed over its threads): the harness took CPU the "
            f"target needed. Give the "
            f"target cores of its own (peakproof pins its generators to the first cores: e.g. taskset -c "
            f"{t.cores - 1} for the target on this {t.cores}-core machine), or run it on a machine of its own")


def _neighbour(t: Tenancy) -> str | None:
    worst: Window | None = None
    for acc in stretches(t.windows, WINDOW):
        taken = acc.neighbours / acc.span
        waited = (acc.waited_run + acc.waited_target) / acc.span
        if taken >= NEIGHBOUR_CORES and waited >= RUN_WAIT and (worst is None or taken > worst.neighbours / worst.span):
            worst = acc
    if worst is None:
        return None
    busiest = t.outside_sentence()
    return (f"processes outside the run{' (the busiest over the stage: ' + busiest + ')' if busiest else ''} took "
            f"{worst.neighbours / worst.span:.2f} of a core in its worst "
            f"{worst.span:.0f} s ({t.share('neighbours'):.0%} of the machine's {t.cores} core(s) over the "
            f"stage) while the run's own threads waited for a CPU {(worst.waited_run + worst.waited_target) / worst.span:.0%} "
            f"of that time (the target's {worst.waited_target / worst.span:.0%}): a neighbour took CPU the run "
            f"needed. Run again on a quiet machine, or with the target and the generators on machines of their own")
