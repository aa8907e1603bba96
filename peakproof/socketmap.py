"""This machine's sockets and processes as /proc shows this user: who holds each socket, each loopback
connection's other end, each process's name and folder, what the user stated (peakproof.components reads
them to find the target's processes).

Where /proc or the kernel's netlink cannot be read (another user's process), less is known and nothing false
is said: a socket whose holder cannot be read has no owner here.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from dataclasses import dataclass, field
from typing import Iterable

__all__ = ["SocketMap", "read_sockets", "Cwds", "display_name", "stated_pids"]


@dataclass
class SocketMap:
    """This machine's sockets as the harness can see them: who owns each (by inode), each connected
    socket's peer, and which sockets are a server's side of a connection."""

    owners: dict[int, set[int]] = field(default_factory=dict)  # inode -> pids holding it
    pid_inodes: dict[int, set[int]] = field(default_factory=dict)  # pid -> socket inodes it holds
    peers: dict[int, int] = field(default_factory=dict)  # inode -> the inode at the connection's other end
    server_side: set[int] = field(default_factory=set)  # inodes that are the accepting end (or a listener)
    listening: set[int] = field(default_factory=set)  # listening sockets' inodes
    listening_ports: dict[int, set[int]] = field(default_factory=dict)  # TCP port -> listening inodes
    # a socket's own address ("127.0.0.1:5432", a Unix socket's path), and the listening sockets at each address:
    # what a connection whose server this user cannot read is said to lead to
    addresses: dict[int, str] = field(default_factory=dict)
    listening_addresses: dict[str, set[int]] = field(default_factory=dict)


# -- reading /proc ------------------------------------------------------------------------------------------------

def _addr(hexaddr: str) -> tuple[str, int]:
    host, port = hexaddr.rsplit(":", 1)
    return host, int(port, 16)


def _loopback_hex(host: str) -> bool:
    if len(host) == 8:  # IPv4, little-endian: 127.x.x.x ends with "7F"
        return host.upper().endswith("7F")
    h = host.upper()  # IPv6 ::1, or ::ffff:127.x.x.x
    return h == "00000000000000000000000001000000" or (h.startswith("0000000000000000FFFF0000") and h.endswith("7F"))


def _tcp(sm: SocketMap) -> None:
    conns: dict[tuple[tuple[str, int], tuple[str, int]], int] = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10:
                continue
            local, remote, state, inode = _addr(cols[1]), _addr(cols[2]), cols[3], int(cols[9])
            if inode and _loopback_hex(local[0]):
                sm.addresses[inode] = f"127.0.0.1:{local[1]}" if len(local[0]) == 8 else f"[::1]:{local[1]}"
            if state == "0A":
                sm.listening.add(inode)
                sm.server_side.add(inode)
                sm.listening_ports.setdefault(local[1], set()).add(inode)
                if inode in sm.addresses:
                    sm.listening_addresses.setdefault(sm.addresses[inode], set()).add(inode)
            elif state == "01" and inode and _loopback_hex(local[0]) and _loopback_hex(remote[0]):
                conns[(local, remote)] = inode
    for (local, remote), inode in conns.items():
        peer = conns.get((remote, local))
        if peer is None:  # IPv4 seen from an IPv6 socket (::ffff:127.0.0.1) or the other way: match on ports
            peer = next((i for (l2, r2), i in conns.items() if l2[1] == remote[1] and r2[1] == local[1]), None)
        if peer is not None:
            sm.peers[inode] = peer
            if local[1] in sm.listening_ports:
                sm.server_side.add(inode)


def _unix(sm: SocketMap) -> None:
    """Unix stream sockets: their peers from the kernel's sock_diag (``ss -x`` reads the same); which
    end is the server's from /proc/net/unix (an accepted socket carries its listener's path)."""
    paths: set[int] = set()
    try:
        with open("/proc/net/unix") as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                # Num RefCount Protocol Flags Type St Inode [Path]
                if len(cols) >= 7 and cols[4] == "0001":  # SOCK_STREAM
                    inode = int(cols[6])
                    if len(cols) >= 8 and not cols[7].startswith("@"):  # bound to a path (abstract names aside)
                        paths.add(inode)
                        sm.addresses[inode] = cols[7]
                    if int(cols[3], 16) & 0x10000:  # __SO_ACCEPTCON: listening
                        sm.listening.add(inode)
                        if inode in sm.addresses:
                            sm.listening_addresses.setdefault(sm.addresses[inode], set()).add(inode)
    except OSError:
        return
    sm.server_side |= paths
    sm.peers.update(_unix_peers())


def _unix_peers() -> dict[int, int]:
    """inode -> peer inode of every connected Unix socket, from NETLINK_SOCK_DIAG; {} where refused."""
    NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, UDIAG_SHOW_PEER, UNIX_DIAG_PEER = 4, 20, 0x4, 2
    NLM_F_REQUEST, NLM_F_DUMP, NLMSG_DONE, NLMSG_ERROR = 0x1, 0x300, 3, 2
    out: dict[int, int] = {}
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    except (OSError, AttributeError):
        return out
    try:
        req = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, UDIAG_SHOW_PEER, 0xFFFFFFFF, 0xFFFFFFFF)
        s.send(struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + req)
        s.settimeout(2.0)
        while True:
            data = s.recv(1 << 20)
            if not data:
                return out
            off = 0
            while off + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, off)
                if length < 16 or kind == NLMSG_DONE or kind == NLMSG_ERROR:
                    return out
                body = off + 16
                _fam, _typ, _state, _pad, ino = struct.unpack_from("=BBBBI", data, body)
                a = body + 16  # unix_diag_msg is 16 bytes; its attributes follow, 4-byte aligned
                while a + 4 <= off + length:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    if atype == UNIX_DIAG_PEER and alen >= 8:
                        peer = struct.unpack_from("=I", data, a + 4)[0]
                        if peer:
                            out[ino] = peer
                    a += (alen + 3) & ~3
                off += (length + 3) & ~3
    except OSError:
        return out
    finally:
        s.close()


def read_sockets() -> SocketMap:
    """Every socket this user can see: TCP over loopback, Unix stream sockets, and who holds each."""
    sm = SocketMap()
    _tcp(sm)
    _unix(sm)
    try:
        names = os.listdir("/proc")
    except OSError:
        return sm
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inode = int(link[8:-1])
                sm.owners.setdefault(inode, set()).add(pid)
                sm.pid_inodes.setdefault(pid, set()).add(inode)
    return sm


class Cwds:
    """Each process's working directory, read from /proc when asked (discovery asks of a few): ``.get(pid)``."""

    def __init__(self) -> None:
        self._seen: dict[int, str | None] = {}

    def get(self, pid: int, default: str | None = None) -> str | None:
        if pid not in self._seen:
            try:
                self._seen[pid] = os.readlink(f"/proc/{pid}/cwd")
            except OSError:  # another user's process: its folder is no kinship we can see
                self._seen[pid] = None
        return self._seen[pid] if self._seen[pid] is not None else default


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


INTERPRETERS = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|node|ruby[0-9.]*|perl|java|php[0-9.-]*|sh|bash|dash|uwsgi)$")


def display_name(pid: int, comm: str) -> str:
    """A process's name as a reader knows it: its command (``postgres``, ``celery``), or for an interpreter
    the module or script it runs (``python -m gunicorn ...`` is ``gunicorn``; ``python jobs/expire.py`` is
    ``expire.py``), since "python x12" says nothing of which part of a system is busy."""
    if not INTERPRETERS.match(comm):
        return comm
    args = _cmdline(pid).split()
    for i, arg in enumerate(args[1:], 1):
        if arg == "-m" and i + 1 < len(args):
            return args[i + 1].rsplit(".", 1)[-1] if not args[i + 1].endswith("__main__") else args[i + 1]
        if arg == "-c":
            return comm
        if not arg.startswith("-"):  # a script; one read from a descriptor (bash /dev/fd/3) is its interpreter
            return comm if arg.startswith("/dev/fd/") else os.path.basename(arg)
    return comm


def _cgroups(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return [line.rstrip("\n").split(":", 2)[2] for line in f if line.count(":") >= 2]
    except OSError:
        return []


def stated_pids(comms: dict[int, str], processes: Iterable[str] = (), cgroup: str | None = None,
                never: set[int] = frozenset()) -> dict[int, str]:  # type: ignore[assignment]
    """pid -> why, for what the user stated: ``--target-process`` (a PID, or a regular expression searched
    in each process's name and command line) and ``--target-cgroup`` (a cgroup path: ``/system.slice/x``,
    or the same under ``/sys/fs/cgroup``), the processes in ``never`` aside (the run's root and ancestors)."""
    out: dict[int, str] = {}
    for text in processes:
        if text.isdigit():
            if int(text) in comms and int(text) not in never:
                out[int(text)] = f"stated: --target-process {text}"
            continue
        pattern = re.compile(text)
        for pid, comm in comms.items():
            if pid not in never and pid not in out and (pattern.search(comm) or pattern.search(_cmdline(pid))):
                out[pid] = f"stated: --target-process {text}"
    if cgroup:
        want = "/" + cgroup.removeprefix("/sys/fs/cgroup").strip("/")
        for pid in comms:
            if pid not in never and pid not in out and any(
                    c == want or c.startswith(want.rstrip("/") + "/") for c in _cgroups(pid)):
                out[pid] = f"stated: --target-cgroup {cgroup}"
    return out
