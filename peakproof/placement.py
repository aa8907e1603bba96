"""Who uses this machine's cores during a run: the harness counts itself.

When the target runs on this machine (the embedded reference, or any loopback URL), every
core the generators use is a core the target cannot. A target starved by the generators
the harness started is not a target that "could not take the load": the placement says,
before the load, which process runs where, and whether the busy processes outnumber the
cores. When they do, a shortfall or a latency miss is not decided (INCONCLUSIVE, naming
this cause and its fix), never FAIL.

Pure except :func:`usable_cores`, :func:`pin` and :func:`cpu_seconds`, which read or set
the operating system's view (Linux; elsewhere they degrade to "unknown" / no-ops).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, so a container's or taskset's limit counts)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def on_loopback(url: str) -> bool:
    """The URL's host is this machine (127.0.0.0/8, ::1 or localhost)."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auto_processes(cores: int, target_local: bool) -> int:
    """``--processes auto``: every core generates, but one is left to a target on this machine."""
    return max(1, cores - (1 if target_local else 0))


@dataclass(frozen=True)
class Placement:
    """Where the run's busy processes go. ``helpers``: other processes the harness started that
    work during the load (the provider simulator of notifications)."""

    cores: int
    generators: int
    target: str  # "embedded" (the harness started it), "loopback" (this machine, someone else's), "remote"
    helpers: tuple[str, ...] = ()
    generator_cores: tuple[int, ...] = field(default=())  # empty: not pinned
    target_cores: tuple[int, ...] = field(default=())
    # a target on this machine that the harness did not start: what /proc says of it (machine.target_facts)
    facts: str | None = None

    @property
    def busy(self) -> int:
        return self.generators + (1 if self.target != "remote" else 0) + len(self.helpers)

    @property
    def shared(self) -> bool:
        """The target shares cores with generators the harness runs: its latency is partly ours."""
        return self.target != "remote" and self.busy > self.cores

    def sentence(self) -> str:
        gens = f"{self.generators} generator process{'es' if self.generators != 1 else ''}"
        where = {"embedded": "the embedded target", "loopback": "the target on this machine (loopback)"}
        if self.target == "remote":
            return f"{gens} on {self.cores} core(s); the target is elsewhere"
        who = ", ".join([gens, where[self.target], *self.helpers])
        if self.shared:
            return (f"{who}: {self.busy} busy processes on {self.cores} core(s), so the target shares cores with the "
                    f"generators: a shortfall or a latency miss will be INCONCLUSIVE, not FAIL (for a verdict on the "
                    f"target's capacity: {self.fix()})")
        if self.target == "embedded":
            pinned = (f"; generators pinned to core(s) {_cores(self.generator_cores)}, the target to core(s) "
                      f"{_cores(self.target_cores)}" if self.generator_cores and self.target_cores else "")
            return f"{who}: {self.busy} busy processes on {self.cores} core(s), each its own{pinned}"
        # someone else's target: peakproof pins only its own generators and says what it found of the target
        gens = (f"generators pinned to core(s) {_cores(self.generator_cores)}" if self.generator_cores
                else "generators not pinned")
        return (f"{who}: {gens}; {self.facts or 'the target processes: unknown'} (not pinned by peakproof; its "
                f"CPU, the cores it ran on and what it waited for a CPU are measured in each stage)")

    def fix(self) -> str:
        """What would give the target cores of its own."""
        fewer = auto_processes(self.cores, True)
        if self.generators > fewer and self.busy - (self.generators - fewer) <= self.cores:
            return f"--processes {fewer} (one core left to the target), or a target on its own machine"
        return (f"a target{' and ' + ', '.join(self.helpers) if self.helpers else ''} on machines of their own "
                f"(--target-url{', --provider-url' if self.helpers else ''}), or a machine with {self.busy} cores or more")

    def shared_reason(self) -> str | None:
        """Why a miss would not be the target's, when it would not be (for the judge)."""
        if not self.shared:
            return None
        return (f"the target shared this machine's {self.cores} core(s) with {self.generators} generator "
                f"process{'es' if self.generators != 1 else ''}{' and ' + ', '.join(self.helpers) if self.helpers else ''} "
                f"that the harness ran ({self.busy} busy processes): its answers waited for CPU the harness took; "
                f"{self.fix()}")


def place(cores: int, generators: int, target: str, helpers: tuple[str, ...] = (), can_pin: bool | None = None) -> Placement:
    """Pin when every busy process can have its own core: the target (and helpers) on the last
    cores, the generators on the first. Otherwise leave the scheduler to share them, and say so."""
    if can_pin is None:
        can_pin = hasattr(os, "sched_setaffinity") and shutil.which("taskset") is not None
    p = Placement(cores, generators, target, helpers)
    if not can_pin or cores < 2 or p.shared:
        return p
    gen = tuple(range(generators))
    if target == "remote":
        return Placement(cores, generators, target, helpers, gen, ())
    rest = tuple(range(generators, cores))
    return Placement(cores, generators, target, helpers, gen, rest)


def _cores(cs: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cs)


def usable_cores_ids() -> list[int]:
    """The CPU numbers this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def core_ids(positions: tuple[int, ...]) -> set[int]:
    """The CPU numbers of the usable cores at these positions (a container may allow cores 2 and 3 only)."""
    usable = usable_cores_ids()
    return {usable[p % len(usable)] for p in positions}


def pin(pid: int | None, cores: tuple[int, ...]) -> bool:
    """Every thread of ``pid`` onto ``cores`` (threads started later inherit it). False if it could not."""
    if not pid or not cores or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    ok = False
    ids = core_ids(cores)
    for tid in tids:
        try:
            os.sched_setaffinity(tid, ids)
            ok = True
        except OSError:
            pass
    return ok


def taskset(cores: tuple[int, ...]) -> list[str]:
    """The command prefix that starts a process on ``cores`` (empty: not pinned)."""
    if not cores or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", _cores(tuple(sorted(core_ids(cores))))]


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | None, children: bool = True) -> float | None:
    """CPU time (user + system, all threads; with ``children``, its reaped children's too) that
    process ``pid`` used so far, from /proc; None where that cannot be read."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # after the command's ")": state is field 3, utime 14, stime 15, cutime 16, cstime 17 (man proc)
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return ticks / _TICK
