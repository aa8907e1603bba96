"""The target as a system: the processes on this machine that serve a URL, found, not guessed.

A real service is not one process. Behind gunicorn's workers stand a database's backends, a
broker and the queue workers that serve it, a periodic job runner. Their CPU is the target's:
counted as a neighbour's, a target that misses its service levels by any factor is never FAILed
(issue 46). From the owners of the URL's listening socket, discovery follows what they talk to
on this machine, over loopback TCP (``/proc/net/tcp{,6}``) and Unix stream sockets (the kernel's
``sock_diag`` netlink, which alone knows a Unix socket's peer), to the processes at the other end:

- a connection the target opened leads to the server that accepted it (the process tree that
  listens there: a PostgreSQL postmaster and its backends, a Redis server) - "connected from";
- a server found so leads to its other clients (queue workers, job runners that meet the web
  process only through the broker or the database) - "a client of";
- and so on, a few hops, each process with its children.

Never pulled in: the run's root and its ancestors (the shell or pytest that started the run),
init, the kernel's threads, and the processes behind the harness's own helpers (``exclude_ports``:
the provider simulator). The generators are clients of the URL itself, which is never followed
backwards. What discovery cannot see (a worker that meets the web process through a file, a
container on another network namespace) is stated: ``--target-process PATTERN|PID`` and
``--target-cgroup PATH``; each component says whether it was found or stated, and how.

:func:`discover` is pure (a process table and a socket map in, the components out);
:func:`read_sockets` and :func:`stated_pids` read /proc. Where /proc or netlink cannot be read,
discovery finds less and says nothing false: the components it found are still the target's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .socketmap import Cwds, SocketMap, display_name, read_sockets, stated_pids  # noqa: F401 (re-exported)

__all__ = ["Component", "SocketMap", "SharedServer", "Discovery", "Cwds", "read_sockets", "discover", "explore", "stated_pids", "display_name", "HOPS"]

HOPS = 4  # connections followed from the socket's owner at most (web -> broker -> worker -> database -> ...)


@dataclass(frozen=True)
class Component:
    """One process of the target, and how the harness knows it is the target's."""

    pid: int
    comm: str
    how: str  # "serves the URL", "connected from gunicorn", "a client of redis-server", "stated: --target-process x"

    @property
    def stated(self) -> bool:
        return self.how.startswith("stated")


# -- the pure part ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SharedServer:
    """A server the target talks to that also serves others: named, its other clients listed, its CPU not the
    target's (its processes that serve only the target's connections are: a PostgreSQL backend)."""

    pid: int  # the process at the top of its tree (the one that listens)
    comm: str
    pids: tuple[int, ...]  # its processes not counted as the target's
    others: tuple[str, ...]  # its other clients, "name pid"
    how: str  # how the target reaches it: "connected from gunicorn"

    def sentence(self) -> str:
        more = f" and {len(self.others) - 4} more" if len(self.others) > 4 else ""
        return (f"{self.comm} x{len(self.pids)} ({self.how}; shared: it also serves {', '.join(self.others[:4])}{more}; "
                f"not counted as the target's: state it with --target-process {self.comm} to count it)")


@dataclass
class Discovery:
    """What discovery found: the target's processes, the servers it shares with others, and the connections
    it could not follow (a server this user cannot read)."""

    components: dict[int, Component] = field(default_factory=dict)
    shared: list[SharedServer] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)


def discover(parents: dict[int, int], comms: dict[int, str], sockets: SocketMap, roots: Iterable[int],
             never: set[int] = frozenset(), stated: dict[int, str] | None = None,  # type: ignore[assignment]
             exclude_ports: Iterable[int] = (), root_how: str = "serves the URL", hops: int = HOPS,
             cwds: "dict[int, str] | Cwds | None" = None, harness: Iterable[int] = ()) -> dict[int, Component]:
    """The target's processes (:func:`explore`'s components)."""
    return explore(parents, comms, sockets, roots, never, stated, exclude_ports, root_how, hops, cwds,
                   harness).components


INITS = {"systemd", "init", "launchd", "tini", "dumb-init", "s6-svscan", "runit"}  # start every service: no kinship


def explore(parents: dict[int, int], comms: dict[int, str], sockets: SocketMap, roots: Iterable[int],
            never: set[int] = frozenset(), stated: dict[int, str] | None = None,  # type: ignore[assignment]
            exclude_ports: Iterable[int] = (), root_how: str = "serves the URL", hops: int = HOPS,
            cwds: "dict[int, str] | Cwds | None" = None, harness: Iterable[int] = ()) -> Discovery:
    """The target's processes: ``roots`` (the URL's socket owners, or the process the run started) and
    their children, the ``stated`` ones, and what their loopback connections lead to (see the module).
    ``parents``/``comms``: the process table; ``never``: processes that are never the target's (the
    run's root and its ancestors, init); ``exclude_ports``: TCP ports of the harness's own helpers;
    ``cwds``: each process's working directory (kinship, below); ``harness``: the run's own processes (its
    generators, a driver that reads the target's database): a server's client among them is neither the
    target's nor another application's.

    A server the target connects to is the target's whole (its tree: a postmaster, its backends and
    helpers) only while every client it serves is the target's. A client reached only through a server is
    the target's when it is kin of the target: started by the same process (a launcher, a supervisor, a
    container's shim; never the run's starters nor init) or running in the same working directory (two
    systemd units of one application). A server with any other client is shared: of it, only the processes
    that serve the target's own connections are the target's (PostgreSQL runs one backend per connection);
    a single-process server (Redis) is the target's not at all, unless stated. A connection whose server
    this user cannot read (``/proc/PID/fd`` of another user) is said, never guessed."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    excluded = set(never) | {0, 1, 2} | {p for p, pp in parents.items() if pp == 2}  # init, kthreadd's threads
    for port in exclude_ports:
        for inode in sockets.listening_ports.get(port, ()):
            for owner in sockets.owners.get(inode, ()):
                excluded |= _tree(children, owner)
    found: dict[int, Component] = {}
    frontier: list[int] = []
    cwds = cwds or {}
    ours = set(harness)

    def add(pid: int, how: str, group: bool = True) -> None:
        # a forked worker's master runs the same program (a Celery worker's parent, gunicorn's arbiter): the
        # component is the whole group, from the topmost process of that name (``group``: not for a backend,
        # whose postmaster runs the same program and serves others)
        while group and parents.get(pid, 0) > 1 and parents[pid] not in excluded \
                and comms.get(parents[pid]) == comms.get(pid):
            pid = parents[pid]
        for p in sorted(_tree(children, pid) - excluded):
            if p not in found:
                found[p] = Component(p, comms.get(p, "?"), how)
                frontier.append(p)

    for root in roots:
        add(root, root_how)
    stated = stated or {}
    for pid, why in stated.items():
        add(pid, why)
    kin_of = _kinship(set(found), parents, comms, excluded, cwds)
    servers: dict[int, str] = {}  # listener -> how the target reaches it
    others: dict[int, set[int]] = {}  # listener -> its clients that are not the target's
    unseen: dict[str, None] = {}
    for _ in range(hops):
        # the clients of each server reached so far: the target's kin join it, the rest make the server shared
        for server in list(servers):
            for p in sorted(_tree(children, server) - excluded):
                for inode in sockets.pid_inodes.get(p, ()):
                    if inode not in sockets.server_side or inode in sockets.listening:
                        continue
                    for client in sockets.owners.get(sockets.peers.get(inode, -1), ()):
                        if client in excluded or client in ours or _within(client, server, parents):
                            continue
                        if client not in found and (why := kin_of(client)):
                            add(client, f"a client of {comms.get(server, '?')}; kin: {why}")
                        if client in found:
                            if p != server and p not in found:
                                add(p, f"serves {comms.get(client, '?')}'s connections", group=False)
                        else:
                            others.setdefault(server, set()).add(client)
        todo, frontier[:] = list(frontier), []
        for pid in todo:
            for inode in sockets.pid_inodes.get(pid, ()):
                peer = sockets.peers.get(inode)
                if peer is None or inode in sockets.server_side:
                    continue  # a connection this process accepted: its clients (the generators) are not followed
                owners = sockets.owners.get(peer, set())
                if not owners:
                    if (where := _unreadable_server(peer, sockets)) is not None:
                        unseen.setdefault(f"a connection of {comms.get(pid, '?')} (pid {pid}) to {where}, served "
                                          f"by a process this user cannot read: state it with --target-process "
                                          f"PATTERN|PID, or run as its user", None)
                    continue
                for other in owners:
                    if other in found or other in excluded:
                        continue
                    server = _listener_of(other, parents, sockets, excluded)
                    servers.setdefault(server, f"connected from {comms.get(pid, '?')}")
                    if other != server:  # a process per connection: the one serving this connection is the target's
                        add(other, f"serves {comms.get(pid, '?')}'s connections", group=False)
    shared: list[SharedServer] = []
    for server, how in servers.items():
        tree = _tree(children, server) - excluded
        if not others.get(server) or server in stated:
            for p in sorted(tree):  # every client is the target's: so is the whole server
                if p not in found or found[p].how.startswith("serves ") and "connections" in found[p].how:
                    found[p] = Component(p, comms.get(p, "?"), how)
            continue
        names = sorted({f"{comms.get(c, '?')} {min(_group(c, parents, comms, excluded))}" for c in others[server]})
        shared.append(SharedServer(server, comms.get(server, "?"), tuple(sorted(tree - set(found))), tuple(names), how))
    return Discovery(found, shared, list(unseen))


def _group(pid: int, parents: dict[int, int], comms: dict[int, str], excluded: set[int]) -> set[int]:
    """A process and its ancestors of the same program (a worker and its master): named by the topmost."""
    out = {pid}
    while parents.get(pid, 0) > 1 and parents[pid] not in excluded and comms.get(parents[pid]) == comms.get(pid):
        pid = parents[pid]
        out.add(pid)
    return out


def _within(pid: int, top: int, parents: dict[int, int]) -> bool:
    for _ in range(32):
        if pid == top:
            return True
        if pid <= 1:
            return False
        pid = parents.get(pid, 0)
    return False


def _kinship(target: set[int], parents: dict[int, int], comms: dict[int, str], excluded: set[int],
             cwds: "dict[int, str] | Cwds"):  # type: ignore[no-untyped-def]
    """A test of whether a process is kin of the target's first processes, and why ("" when not): started by
    one of the processes that started them (never the run's starters, init, or a service manager), or running
    in the same working directory (not ``/``)."""
    starters: set[int] = set()
    for pid in target:
        p = parents.get(pid, 0)
        for _ in range(16):
            if p <= 1 or p in excluded or comms.get(p) in INITS:
                break
            if p not in target:
                starters.add(p)
            p = parents.get(p, 0)
    homes = {h for p in target if (h := cwds.get(p)) not in (None, "", "/")}

    def line(pid: int) -> list[int]:  # it and its ancestors, up to what is never the target's
        out, p = [], pid
        for _ in range(16):
            if p <= 1 or p in excluded:
                break
            out.append(p)
            p = parents.get(p, 0)
        return out

    def kin(pid: int) -> str:
        ancestry = line(pid)
        if (p := next((a for a in ancestry if a in starters), None)) is not None:
            return f"started by {comms.get(p, '?')}, as the target is"
        if (p := next((a for a in ancestry if cwds.get(a) in homes), None)) is not None:  # it, or its master
            return f"runs in the target's folder {cwds.get(p)}"
        return ""

    return kin


def _unreadable_server(peer: int, sockets: SocketMap) -> str | None:
    """Where a connection whose other end no process this user can read holds leads: its server's address,
    when that server's listening socket is unreadable too (else the connection just closed: nothing said)."""
    where = sockets.addresses.get(peer)
    if where is None:
        return None
    listeners = sockets.listening_addresses.get(where, set())
    if any(sockets.owners.get(i) for i in listeners):
        return None
    return where


def _tree(children: dict[int, list[int]], root: int) -> set[int]:
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


def _listener_of(pid: int, parents: dict[int, int], sockets: SocketMap, excluded: set[int]) -> int:
    """The process at the top of the tree that serves ``pid``'s connection: its nearest ancestor holding a
    listening socket (a PostgreSQL backend's postmaster), or itself."""
    p, best = pid, pid
    for _ in range(16):
        if p in excluded or p <= 1:
            break
        if sockets.listening & sockets.pid_inodes.get(p, set()):
            best = p
        p = parents.get(p, 0)
    return best
