"""What Linux's /proc says of this machine's CPU and processes: the readers the tenant meter
(:mod:`peakproof.tenants`) and the placement use. Each degrades to None or empty where /proc cannot be
read (another OS, a locked-down container): the sentences then say "unknown"."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


def tids_of(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def ancestors(pid: int) -> set[int]:
    """The processes above ``pid`` (its parent, theirs, ... below init)."""
    out: set[int] = set()
    p = pid
    for _ in range(64):
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                ppid = int(f.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if ppid <= 1 or ppid in out:
            break
        out.add(ppid)
        p = ppid
    return out
