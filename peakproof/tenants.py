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

from .components import Component
# the judging of a stage's tenancy (pure), and its thresholds: re-exported
from .contention import (NEIGHBOUR_CORES, RUN_WAIT, SATURATED, WINDOW, Window, contention,  # noqa: F401
                         shared_with_the_run, stretches)
from .procfs import (Proc, affinity, ancestors, busy_by_cpu, cores_text, listening_pids,  # noqa: F401 (re-exported)
                     process_table, thread_stats, tids_of, with_descendants)



# -- measuring a stage ------------------------------------------------------------------------------------------

class TenantMeter:
    """Reads the machine at :meth:`sample` (call it every second or so, and once at the end) and keeps
    the windows between readings. ``root``: the run's process (its tree is the run's); ``target_pids``:
    the target's processes on this machine (their children join them); ``port``: a loopback target's
    port, whose listening socket's owner is the target."""

    def __init__(self, root: int | None = None, target_pids: Iterable[int] = (), port: int | None = None,
                 stated: Iterable[str] = (), cgroup: str | None = None, exclude_ports: Iterable[int] = ()) -> None:
        from .placement import usable_cores_ids

        self.root = root or os.getpid()
        self.port = port
        found = listening_pids(port) if port else []
        self.found_by_socket = found
        self.target_roots = sorted(set(target_pids) | set(found or []))
        self.stated, self.cgroup, self.exclude_ports = tuple(stated), cgroup, tuple(exclude_ports)
        # the run's root and the processes that started it (a shell, pytest) are never the target's
        self.never = {self.root, os.getpid()} | ancestors(self.root) | ancestors(os.getpid())
        self.components: dict[int, Component] = {}  # pid -> how it is the target's (peakproof.components)
        # servers the target shares with others (named, not counted as the target's) and connections it could not
        # follow (a server another user runs): peakproof.components.explore
        self.shared: dict[str, tuple[int, ...]] = {}
        self.unseen: list[str] = []
        self._reads = 0
        # the cores the run and the target may use (a generator pinned to one core still shares the machine)
        self.cpus = sorted({c for pid in [self.root, *self.target_roots] for c in (affinity(pid) or ())}
                           or set(usable_cores_ids()))
        self.windows: list[Window] = []
        self.target_names: dict[int, str] = {}
        self.cores_seen: dict[str, set[int]] = {"run": set(), "target": set()}
        # CPU-seconds by whom and core (each thread's time in a window put on the core it last ran on)
        self.core_seconds: dict[str, dict[int, float]] = {"run": {}, "target": {}}
        # the target's components (name, how found): CPU and run-queue wait per window, and what each was
        self.component_windows: list[dict[str, tuple[float, float]]] = []
        self.component_facts: dict[str, dict[str, Any]] = {}
        # CPU-seconds of the processes outside the run and the target, by name (who the neighbours were)
        self.outside, self._outside_last, self._names = {}, {}, {}  # type: dict[str, float], dict[int, float], dict[int, str]
        self._last = self._read()
        self._first_t = self._last[0] if self._last else time.monotonic()

    @classmethod
    def for_url(cls, url: str | None, root: int | None = None, target_pids: Iterable[int] = (),
                stated: Iterable[str] = (), cgroup: str | None = None, helpers: Iterable[str | None] = ()
                ) -> "TenantMeter":
        """The meter of a stage against ``url``: the run's tree under ``root`` (None: this process), the
        target's ``target_pids`` and, for a loopback URL, the owners of its listening socket and what they
        talk to (peakproof.components); ``stated``/``cgroup``: --target-process / --target-cgroup;
        ``helpers``: the URLs of the harness's own helpers (the provider simulator), never the target's."""
        port = _loopback_port(url)
        exclude = [p for p in (_loopback_port(h) for h in helpers) if p]
        return cls(root, target_pids, port, stated, cgroup, exclude)

    @classmethod
    def for_spec(cls, spec: Any, facts: Any, url: str | None = None, root: int | None = None) -> "TenantMeter":
        """The meter of a stage of ``spec`` (a RunSpec): its URL, stated processes and helpers, and, from
        ``facts`` (its RunFacts), the run's root and the target's pids."""
        return cls.for_url(url if url is not None else spec.target_url, root if root is not None else facts.run_pid,
                           facts.target_pids, spec.target_process, spec.target_cgroup, [spec.opt("provider_url")])

    def _discover(self, table: dict[int, Proc]) -> dict[int, Component]:
        """The target's processes now: discovery in full every few reads (it reads every process's sockets);
        in between, the components known and their new children (a worker forked since)."""
        self._reads += 1
        if self._reads % 5 == 1 or not self.components:
            from .components import Cwds, display_name, explore, read_sockets, stated_pids

            comms = {pid: display_name(pid, p.comm) for pid, p in table.items()}
            parents = {pid: p.ppid for pid, p in table.items()}
            stated = stated_pids(comms, self.stated, self.cgroup, self.never) if (self.stated or self.cgroup) else {}
            if self.port or self.target_roots or stated:
                # the run's own processes (a driver reading the target's database) share no server with it
                harness = with_descendants(table, [self.root]) - with_descendants(table, self.target_roots)
                seen = explore(parents, comms, read_sockets(), self.target_roots, self.never, stated,
                               self.exclude_ports, cwds=Cwds(), harness=harness)
                self.components = seen.components
                for server in seen.shared:  # the latest word on each (its other clients come and go)
                    self.shared[server.sentence()] = server.pids
                    for pid in server.pids:
                        self._names[pid] = f"{display_name(pid, table[pid].comm) if pid in table else server.comm} (shared)"
                self.unseen = list(dict.fromkeys([*self.unseen, *seen.unseen]))
            return {pid: c for pid, c in self.components.items() if pid in table}
        from .components import display_name

        live = {pid: c for pid, c in self.components.items() if pid in table}
        for pid in sorted(with_descendants(table, list(live)) - set(live) - self.never):
            parent = live.get(table[pid].ppid)
            if parent is not None:
                live[pid] = Component(pid, display_name(pid, table[pid].comm), parent.how)
        self.components = live
        return live

    def _read(self) -> tuple[float, dict[int, float], dict[int, float], set[int], set[int],
                             dict[int, tuple[float, float, int]], set[int], dict[int, Component]] | None:
        busy = busy_by_cpu(self.cpus)
        if busy is None:
            return None
        table = process_table()
        components = self._discover(table)
        target = set(components) | with_descendants(table, self.target_roots)
        run = with_descendants(table, [self.root]) - target
        kernel = {p.pid for p in table.values() if p.ppid == 2 or p.pid == 2}  # kthreadd and its threads
        for pid in target:
            self.target_names.setdefault(pid, table[pid].comm)
        cpu = {pid: table[pid].cpu for pid in run | target | kernel}
        threads = thread_stats(run | target)
        self._count_outside(table, run | target | kernel)
        return time.monotonic(), busy, cpu, run, target, threads, kernel, components

    def _count_outside(self, table: dict[int, Proc], ours: set[int]) -> None:
        """Each outside process's CPU since the last read, by name (one that lived between two reads is unseen)."""
        from .components import display_name  # "gunicorn", "expire.py": not "python3.11"; read once per process
        now = {pid: p.cpu for pid, p in table.items() if pid not in ours}
        for pid, cpu in now.items() if self._reads > 1 else ():
            if (spent := cpu - self._outside_last.get(pid, 0.0)) > 0:
                name = self._names.get(pid) or self._names.setdefault(pid, display_name(pid, table[pid].comm))
                self.outside[name] = self.outside.get(name, 0.0) + spent
        self._outside_last = now

    def sample(self) -> None:
        now = self._read()
        if now is None or self._last is None:
            return
        t0, busy0, cpu0, _, _, th0, _, _ = self._last
        t1, busy1, cpu1, run, target, th1, kernel, components = now
        machine = sum(busy1[c] - busy0.get(c, busy1[c]) for c in busy1)

        def used(group: set[int]) -> float:
            return sum(cpu1[p] - cpu0.get(p, 0.0) for p in group)

        tid_owner: dict[int, str] = {}
        tid_component: dict[int, str] = {}
        per: dict[str, list[float]] = {}  # component -> [CPU s, run-queue wait s] in this window
        for pid in target:
            label = component_label(components.get(pid), self.target_names.get(pid, "?"))
            for tid in tids_of(pid):
                tid_owner[tid] = "target"
                tid_component[tid] = label
            per.setdefault(label, [0.0, 0.0])[0] += max(0.0, cpu1[pid] - cpu0.get(pid, 0.0))
            facts = self.component_facts.setdefault(label, {"pids": set(), "cores": set()})
            facts["pids"].add(pid)
        waited = {"run": 0.0, "target": 0.0}
        for tid, (_run, wait, core) in th1.items():
            who = tid_owner.get(tid, "run")
            waited_here = max(0.0, wait - th0.get(tid, (0.0, 0.0, 0))[1])
            waited[who] += waited_here
            if tid in tid_component:
                per[tid_component[tid]][1] += waited_here
            if _run > th0.get(tid, (0.0, 0.0, 0))[0]:
                self.cores_seen[who].add(core)
                if tid in tid_component:
                    self.component_facts[tid_component[tid]]["cores"].add(core)
                used_here = self.core_seconds[who]
                used_here[core] = used_here.get(core, 0.0) + _run - th0.get(tid, (0.0, 0.0, 0))[0]
        self.windows.append(Window(t1 - t0, machine, max(0.0, used(run)), max(0.0, used(target)),
                                   waited["run"], waited["target"], max(0.0, used(kernel))))
        self.component_windows.append({k: (round(v[0], 4), round(v[1], 4)) for k, v in per.items()})
        self._last = now

    def result(self) -> "Tenancy":
        self.sample()
        return Tenancy(len(self.cpus), self.windows, sorted(self.target_names.items()),
                       {k: sorted(v) for k, v in self.cores_seen.items()},
                       {pid: a for pid in [*self.target_roots, *self.target_names] if (a := affinity(pid)) is not None},
                       self.port, self.found_by_socket,
                       {k: {c: round(x, 4) for c, x in v.items()} for k, v in self.core_seconds.items()},
                       self._component_summary(), self.component_windows,
                       {k: round(v, 2) for k, v in sorted(self.outside.items(), key=lambda kv: -kv[1])[:5]},
                       _latest_per_server(list(self.shared)), list(self.unseen))

    def _component_summary(self) -> list[dict[str, Any]]:
        """Each component of the target over the stage: its name, how it was found, its processes, CPU,
        run-queue wait and cores, the busiest first."""
        out = []
        for label, facts in self.component_facts.items():
            cpu = sum(w.get(label, (0.0, 0.0))[0] for w in self.component_windows)
            waited = sum(w.get(label, (0.0, 0.0))[1] for w in self.component_windows)
            out.append({"label": label, "processes": len(facts["pids"]), "cpu": round(cpu, 3),
                        "waited": round(waited, 3), "cores": sorted(facts["cores"])})
        # the busiest first; at equal CPU (nothing ran yet) the URL's own processes, then in the order found
        return sorted(out, key=lambda c: (-c["cpu"], not c["label"].endswith("(serves the URL)")))


class Metered:
    """A stage run beside a meter sampling once a second on a thread of its own (for stages that run in
    a child process the harness waits on: the properties). ``with Metered(url, pids) as m: ...``, then
    ``m.tenancy``."""

    def __init__(self, url: str | None, target_pids: Iterable[int] = (), spec: Any = None) -> None:
        self.url, self.target_pids, self.spec = url, tuple(target_pids), spec
        self.tenancy: Tenancy | None = None

    def __enter__(self) -> "Metered":
        import threading

        self.meter: TenantMeter | None = None
        try:
            self.meter = (TenantMeter.for_url(self.url, None, self.target_pids) if self.spec is None else
                          TenantMeter.for_url(self.url, None, self.target_pids, self.spec.target_process,
                                              self.spec.target_cgroup, [self.spec.opt("provider_url")]))
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



def _latest_per_server(sentences: list[str]) -> list[str]:
    """Of the sentences said of each shared server over a stage (its other clients change), the last one."""
    last: dict[str, str] = {}
    for s in sentences:
        last[s.split(" x", 1)[0]] = s
    return list(last.values())


def _loopback_port(url: str | None) -> int | None:
    from urllib.parse import urlsplit

    from .placement import on_loopback

    if not url or not on_loopback(url):
        return None
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def split_label(label: str) -> tuple[str, str]:
    """A component's label back into its name and how it was found."""
    name, _, how = label.partition(" (")
    return name, how[:-1] if how.endswith(")") else how


def component_label(c: Component | None, comm: str) -> str:
    """A component of the target, as the sentences and the chart name it: its name and how it was found."""
    return f"{c.comm} ({c.how})" if c is not None else f"{comm} (serves the URL)"



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
    # the target's components (peakproof.components): [{label, processes, cpu, waited, cores}], the busiest first,
    # and each window's {label: (CPU s, run-queue wait s)}
    components: list[dict[str, Any]] = field(default_factory=list)
    component_windows: list[dict[str, tuple[float, float]]] = field(default_factory=list)
    # the processes outside the run and the target that used the most CPU over the stage: name -> CPU-seconds
    outside: dict[str, float] = field(default_factory=dict)
    # servers the target shares with other applications (counted outside it, each with its other clients), and
    # connections discovery could not follow (a server this user cannot read): peakproof.components
    shared: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)

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
        who = self.outside_sentence()
        peak += f"; the busiest: {who}" if who else ""
        return (f"CPU over {self.wall:,.1f} s on {self.cores} core(s): the run {self.total('run'):,.1f} s, the target "
                f"{self.total('target'):,.1f} s{'' if self.target_processes else ' (not on this machine, or not found)'}, "
                f"the kernel's threads {self.total('kernel'):,.1f} s, "
                f"processes outside the run {self.total('neighbours'):,.1f} s ({self.share('neighbours'):.0%} of the "
                f"machine{peak}); the run's threads waited for a CPU {self.total('waited_run'):,.1f} s, the "
                f"target's {self.total('waited_target'):,.1f} s")

    def outside_sentence(self) -> str:
        """The busiest processes outside the run and the target, by name: "yes 9.5 s, python3.11 0.4 s", or ""."""
        return ", ".join(f"{k} {v:,.1f} s" for k, v in list(self.outside.items())[:3] if v >= 0.05)

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
        text = (self.components_sentence(seen) + "; " if self.components else "") + (
            f"the target's processes: {names}{more}; allowed on core(s) {cores_text(allowed) if allowed else 'unknown'}")
        if seen:
            text += (f", seen running on core(s) {cores_text(self.cores_seen.get('target', []))}; the run's on "
                     f"{cores_text(self.cores_seen.get('run', []))}")
        return text

    def components_sentence(self, cpu: bool = True) -> str:
        """The target as a system: each component (processes of one name, found one way), its processes and
        (``cpu``) its CPU over the stage; which were found and which stated (--target-process, --target-cgroup)."""
        parts = []
        for c in self.components:
            name, how = split_label(c["label"])
            found = how if how.startswith(("serves", "stated", "started")) else f"found: {how}"
            figures = f" {c['cpu']:,.1f} s, waited for a CPU {c['waited']:,.1f} s" if cpu else ""
            parts.append(f"{name} x{c['processes']}{figures} ({found})")
        stated = sum(1 for c in self.components if split_label(c["label"])[1].startswith("stated"))
        return (f"the target: {', '.join(parts)} ({len(self.components) - stated} component(s) found, {stated} "
                f"stated)" + self.boundary_sentence())

    def boundary_sentence(self) -> str:
        """What discovery left outside the target, and why: shared servers, connections it could not follow."""
        text = "".join(f"; a server shared with others: {s}" for s in self.shared)
        return text + "".join(f"; not seen: {u}" for u in self.unseen)

    def busiest_component(self) -> dict[str, Any] | None:
        """The component that used the most CPU over the stage, with its utilisation (cores) and saturation
        (its threads' run-queue wait, as a share of the stage): the USE method's two figures."""
        if not self.components or not self.wall:
            return None
        c = self.components[0]
        return {**c, "cores_used": c["cpu"] / self.wall, "saturation": c["waited"] / self.wall}

    def busiest_sentence(self) -> str:
        b = self.busiest_component()
        if b is None:
            return ""
        name, how = split_label(b["label"])
        others = [f"{split_label(c['label'])[0]} {c['cpu'] / self.wall:.2f}" for c in self.components[1:4]]
        return (f"the target's busiest component: {name} x{b['processes']} ({how}), {b['cores_used']:.2f} of a core "
                f"over the stage, its threads waiting for a CPU {b['saturation']:.0%} of the time"
                + (f" (then, in cores: {', '.join(others)})" if others else ""))

    def to_json(self) -> dict[str, Any]:
        return {"cores": self.cores, "windows": [w.to_json() for w in self.windows],
                "target_processes": [list(p) for p in self.target_processes], "cores_seen": self.cores_seen,
                "target_affinity": {str(k): list(v) if v else None for k, v in self.target_affinity.items()},
                "port": self.port, "found_by_socket": self.found_by_socket,
                "core_seconds": {k: {str(c): x for c, x in v.items()} for k, v in self.core_seconds.items()},
                "components": self.components,
                "component_windows": [{k: list(v) for k, v in w.items()} for w in self.component_windows],
                "outside": self.outside, "shared": self.shared, "unseen": self.unseen}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Tenancy":
        return cls(d["cores"], [Window.from_json(w) for w in d.get("windows", [])],
                   [(int(p), str(c)) for p, c in d.get("target_processes", [])], d.get("cores_seen", {}),
                   {int(k): tuple(v) if v else None for k, v in d.get("target_affinity", {}).items()},
                   d.get("port"), d.get("found_by_socket"),
                   {k: {int(c): x for c, x in v.items()} for k, v in (d.get("core_seconds") or {}).items()},
                   list(d.get("components") or []),
                   [{k: (float(v[0]), float(v[1])) for k, v in w.items()} for w in d.get("component_windows") or []],
                   {str(k): float(v) for k, v in (d.get("outside") or {}).items()},
                   list(d.get("shared") or []), list(d.get("unseen") or []))

