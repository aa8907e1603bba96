"""Who else used this machine's CPU during a stage, and whether the run's processes waited for it.

A laptop or a shared CI host has other tenants: a package install, a browser, another job. A
target that misses its latency while a neighbour took the CPU it (or the generator timing it)
needed has not shown that it cannot keep its promise. The facts, read from Linux's /proc:

- the machine's busy time, per core (``/proc/stat``: user, nice, system, steal; interrupts and
  softirqs are left out, as they are mostly the run's own loopback traffic);
- the kernel's own threads (children of kthreadd: softirqs of the run's loopback traffic, writeback),
  counted apart and never as a neighbour;
- the run's own processes: the tree under the run's root (``peakproof run``, or the Locust
  process run directly) and the target's processes on this machine, found by the owner of the
  listening socket (``/proc/net/tcp`` inode -> ``/proc/PID/fd``), with their children;
- what every thread of those processes waited, runnable, for a CPU (``/proc/PID/task/TID/schedstat``).

The neighbours' share is the machine's busy time minus the run's own. A window in which the
neighbours took a tenth of a core or more *and* the run's processes waited for a CPU is
contended: a latency miss or a shortfall in it is not decided (:func:`contention`).

:class:`TenantMeter` reads; :class:`Tenancy` (its result) and :func:`contention` are pure. Where
/proc cannot be read the figures are None and the sentences say "unknown".
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# A window is contended when the neighbours took at least this share of one core...
NEIGHBOUR_CORES = 0.10
# ...while the run's processes (generators and target together) spent at least this share of the
# window's wall time runnable but waiting for a CPU (a quiet 2-core host shows about 0.01)
RUN_WAIT = 0.05
WINDOW = 5.0  # s: the span contention is judged over (a neighbour arriving mid-stage is not averaged away)


# -- reading /proc ----------------------------------------------------------------------------------------------

def busy_by_cpu(cpus: Iterable[int] | None = None) -> dict[int, float] | None:
    """Busy seconds so far per CPU (user + nice + system + steal), for ``cpus`` (None: all)."""
    wanted = None if cpus is None else set(cpus)
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out: dict[int, float] = {}
    for line in lines:
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *vals = line.split()
        cpu = int(name[3:])
        if wanted is not None and cpu not in wanted:
            continue
        v = [int(x) for x in vals] + [0] * 8
        out[cpu] = (v[0] + v[1] + v[2] + v[7]) / _TICK
    return out


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    cpu: float  # s: user + system, its own and its reaped children's


def process_table() -> dict[int, Proc]:
    """Every process this user can see."""
    out: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        head, _, rest = raw.rpartition(b")")
        fields = rest.split()
        try:
            comm = head.split(b"(", 1)[1].decode(errors="replace")
            ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
            out[int(name)] = Proc(int(name), int(fields[1]), comm, ticks / _TICK)
        except (IndexError, ValueError):
            continue
    return out


def with_descendants(table: dict[int, Proc], roots: Iterable[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out: set[int] = set()
    todo = [r for r in roots if r in table]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo += children.get(pid, [])
    return out


def listening_pids(port: int) -> list[int] | None:
    """The processes holding a listening TCP socket on ``port`` (any address), from /proc/net/tcp(6) and
    each process's open files; [] when nothing visible listens there, None when /proc cannot tell."""
    inodes: set[str] = set()
    seen_table = False
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        seen_table = True
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    if not seen_table:
        return None
    if not inodes:
        return []
    wanted = {f"socket:[{i}]" for i in inodes}
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in wanted:
                    pids.append(int(name))
                    break
            except OSError:
                continue
    return sorted(pids)


def thread_stats(pids: Iterable[int]) -> dict[int, tuple[float, float, int]]:
    """tid -> (s run, s waited for a CPU while runnable, the CPU it last ran on), every thread of ``pids``."""
    out: dict[int, tuple[float, float, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run_ns, wait_ns, _ = f.read().split()
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    cpu = int(f.read().rpartition(b")")[2].split()[36])
            except (OSError, ValueError, IndexError):
                continue
            out[int(tid)] = (int(run_ns) / 1e9, int(wait_ns) / 1e9, cpu)
    return out


def affinity(pid: int) -> tuple[int, ...] | None:
    try:
        return tuple(sorted(os.sched_getaffinity(pid)))
    except (AttributeError, OSError):
        return None


def cores_text(cores: Iterable[int]) -> str:
    cs = sorted(set(cores))
    if not cs:
        return "none"
    runs, start = [], cs[0]
    for a, b in zip(cs, cs[1:] + [None]):  # type: ignore[operator]
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(runs)


# -- measuring a stage ------------------------------------------------------------------------------------------

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


class TenantMeter:
    """Reads the machine at :meth:`sample` (call it every second or so, and once at the end) and keeps
    the windows between readings. ``root``: the run's process (its tree is the run's); ``target_pids``:
    the target's processes on this machine (their children join them); ``port``: a loopback target's
    port, whose listening socket's owner is the target."""

    def __init__(self, root: int | None = None, target_pids: Iterable[int] = (), port: int | None = None) -> None:
        from .placement import usable_cores_ids

        self.root = root or os.getpid()
        self.port = port
        found = listening_pids(port) if port else []
        self.found_by_socket = found
        self.target_roots = sorted(set(target_pids) | set(found or []))
        # the cores the run and the target may use (a generator pinned to one core still shares the machine)
        self.cpus = sorted({c for pid in [self.root, *self.target_roots] for c in (affinity(pid) or ())}
                           or set(usable_cores_ids()))
        self.windows: list[Window] = []
        self.target_names: dict[int, str] = {}
        self.cores_seen: dict[str, set[int]] = {"run": set(), "target": set()}
        # CPU-seconds by whom and core (each thread's time in a window put on the core it last ran on)
        self.core_seconds: dict[str, dict[int, float]] = {"run": {}, "target": {}}
        self._last = self._read()
        self._first_t = self._last[0] if self._last else time.monotonic()

    @classmethod
    def for_url(cls, url: str | None, root: int | None = None, target_pids: Iterable[int] = ()) -> "TenantMeter":
        """The meter of a stage against ``url``: the run's tree under ``root`` (None: this process), the
        target's ``target_pids`` and, for a loopback URL, the owners of its listening socket."""
        from urllib.parse import urlsplit

        from .placement import on_loopback

        port = None
        if url and on_loopback(url):
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(root, target_pids, port)

    def _read(self) -> tuple[float, dict[int, float], dict[int, float], set[int], set[int],
                             dict[int, tuple[float, float, int]], set[int]] | None:
        busy = busy_by_cpu(self.cpus)
        if busy is None:
            return None
        table = process_table()
        target = with_descendants(table, self.target_roots)
        run = with_descendants(table, [self.root]) - target
        kernel = {p.pid for p in table.values() if p.ppid == 2 or p.pid == 2}  # kthreadd and its threads
        for pid in target:
            self.target_names.setdefault(pid, table[pid].comm)
        cpu = {pid: table[pid].cpu for pid in run | target | kernel}
        threads = thread_stats(run | target)
        return time.monotonic(), busy, cpu, run, target, threads, kernel

    def sample(self) -> None:
        now = self._read()
        if now is None or self._last is None:
            return
        t0, busy0, cpu0, _, _, th0, _ = self._last
        t1, busy1, cpu1, run, target, th1, kernel = now
        machine = sum(busy1[c] - busy0.get(c, busy1[c]) for c in busy1)

        def used(group: set[int]) -> float:
            return sum(cpu1[p] - cpu0.get(p, 0.0) for p in group)

        tid_owner: dict[int, str] = {}
        for pid in target:
            for tid in _tids(pid):
                tid_owner[tid] = "target"
        waited = {"run": 0.0, "target": 0.0}
        for tid, (_run, wait, core) in th1.items():
            who = tid_owner.get(tid, "run")
            waited[who] += max(0.0, wait - th0.get(tid, (0.0, 0.0, 0))[1])
            if _run > th0.get(tid, (0.0, 0.0, 0))[0]:
                self.cores_seen[who].add(core)
                used_here = self.core_seconds[who]
                used_here[core] = used_here.get(core, 0.0) + _run - th0.get(tid, (0.0, 0.0, 0))[0]
        self.windows.append(Window(t1 - t0, machine, max(0.0, used(run)), max(0.0, used(target)),
                                   waited["run"], waited["target"], max(0.0, used(kernel))))
        self._last = now

    def result(self) -> "Tenancy":
        self.sample()
        return Tenancy(len(self.cpus), self.windows, sorted(self.target_names.items()),
                       {k: sorted(v) for k, v in self.cores_seen.items()},
                       {pid: affinity(pid) for pid in self.target_roots},
                       self.port, self.found_by_socket,
                       {k: {c: round(x, 4) for c, x in v.items()} for k, v in self.core_seconds.items()})


class Metered:
    """A stage run beside a meter sampling once a second on a thread of its own (for stages that run in
    a child process the harness waits on: the properties). ``with Metered(url, pids) as m: ...``, then
    ``m.tenancy``."""

    def __init__(self, url: str | None, target_pids: Iterable[int] = ()) -> None:
        self.url, self.target_pids = url, tuple(target_pids)
        self.tenancy: Tenancy | None = None

    def __enter__(self) -> "Metered":
        import threading

        self.meter: TenantMeter | None = None
        try:
            self.meter = TenantMeter.for_url(self.url, None, self.target_pids)
        except Exception:  # noqa: BLE001 - reading /proc must never stop a run; the figures say unknown
            return self
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="peakproof-tenants", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.meter.sample()  # type: ignore[union-attr]

    def __exit__(self, *exc: object) -> None:
        if self.meter is not None:
            self._stop.set()
            self._thread.join()
            self.tenancy = self.meter.result()


def _tids(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


@dataclass
class Tenancy:
    """A stage's CPU, by tenant: the run, the target, everyone else. Pure; JSON round-trips."""

    cores: int
    windows: list[Window] = field(default_factory=list)
    target_processes: list[tuple[int, str]] = field(default_factory=list)
    cores_seen: dict[str, list[int]] = field(default_factory=dict)
    target_affinity: dict[int, tuple[int, ...] | None] = field(default_factory=dict)
    port: int | None = None
    found_by_socket: list[int] | None = None
    core_seconds: dict[str, dict[int, float]] = field(default_factory=dict)  # whom -> core -> CPU-seconds

    @property
    def measured(self) -> bool:
        return bool(self.windows)

    @property
    def wall(self) -> float:
        return sum(w.span for w in self.windows)

    def total(self, what: str) -> float:
        return sum(getattr(w, what) for w in self.windows)

    def share(self, what: str) -> float:
        """``what``'s CPU over the stage, as a share of the machine's usable cores."""
        return self.total(what) / max(1e-9, self.wall * self.cores)

    def busiest(self, span: float = WINDOW) -> Window | None:
        """The contiguous stretch of about ``span`` seconds in which the neighbours took the most."""
        best: Window | None = None
        for acc in stretches(self.windows, span):
            if best is None or acc.neighbours / acc.span > best.neighbours / best.span:
                best = acc
        return best

    def sentence(self) -> str:
        if not self.measured:
            return "the machine's other tenants: unknown (/proc could not be read)"
        b = self.busiest()
        peak = f"; busiest {b.span:.0f} s: {b.neighbours / b.span:.2f} of a core" if b and b.span < self.wall - 0.5 else ""
        return (f"CPU over {self.wall:,.1f} s on {self.cores} core(s): the run {self.total('run'):,.1f} s, the target "
                f"{self.total('target'):,.1f} s{'' if self.target_processes else ' (not on this machine, or not found)'}, "
                f"the kernel's threads {self.total('kernel'):,.1f} s, "
                f"processes outside the run {self.total('neighbours'):,.1f} s ({self.share('neighbours'):.0%} of the "
                f"machine{peak}); the run's threads waited for a CPU {self.total('waited_run'):,.1f} s, the "
                f"target's {self.total('waited_target'):,.1f} s")

    def target_sentence(self, seen: bool = True) -> str:
        """The target's processes on this machine, their cores allowed and (``seen``) run on: facts, or "unknown"."""
        if self.found_by_socket is None:
            return "the target's processes: unknown (/proc/net/tcp could not be read)"
        if not self.target_processes:
            return (f"the target's processes: unknown (nothing this user can see listens on port {self.port})"
                    if self.port else "the target's processes: not on this machine")
        names = ", ".join(f"{pid} ({comm})" for pid, comm in self.target_processes[:8])
        more = f" and {len(self.target_processes) - 8} more" if len(self.target_processes) > 8 else ""
        allowed = sorted({c for a in self.target_affinity.values() if a for c in a})
        text = f"the target's processes: {names}{more}; allowed on core(s) {cores_text(allowed) if allowed else 'unknown'}"
        if seen:
            text += (f", seen running on core(s) {cores_text(self.cores_seen.get('target', []))}; the run's on "
                     f"{cores_text(self.cores_seen.get('run', []))}")
        return text

    def to_json(self) -> dict[str, Any]:
        return {"cores": self.cores, "windows": [w.to_json() for w in self.windows],
                "target_processes": [list(p) for p in self.target_processes], "cores_seen": self.cores_seen,
                "target_affinity": {str(k): list(v) if v else None for k, v in self.target_affinity.items()},
                "port": self.port, "found_by_socket": self.found_by_socket,
                "core_seconds": {k: {str(c): x for c, x in v.items()} for k, v in self.core_seconds.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Tenancy":
        return cls(d["cores"], [Window.from_json(w) for w in d.get("windows", [])],
                   [(int(p), str(c)) for p, c in d.get("target_processes", [])], d.get("cores_seen", {}),
                   {int(k): tuple(v) if v else None for k, v in d.get("target_affinity", {}).items()},
                   d.get("port"), d.get("found_by_socket"),
                   {k: {int(c): x for c, x in v.items()} for k, v in (d.get("core_seconds") or {}).items()})


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
    for acc in stretches(t.windows, WINDOW):
        if acc.run / acc.span >= NEIGHBOUR_CORES and acc.waited_target / acc.span >= RUN_WAIT and (
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
    return (f"processes outside the run took {worst.neighbours / worst.span:.2f} of a core in its worst "
            f"{worst.span:.0f} s ({t.share('neighbours'):.0%} of the machine's {t.cores} core(s) over the "
            f"stage) while the run's own threads waited for a CPU {(worst.waited_run + worst.waited_target) / worst.span:.0%} "
            f"of that time (the target's {worst.waited_target / worst.span:.0%}): a neighbour took CPU the run "
            f"needed. Run again on a quiet machine, or with the target and the generators on machines of their own")
