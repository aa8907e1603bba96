"""Start a reference target as a child process on 127.0.0.1, wait for it, stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import requests

from .errors import TargetError
from .options import SHARED

if TYPE_CHECKING:
    from .case import Case


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answering(url: str, timeout: float, *, proc: subprocess.Popen | None = None,
                         answered: Callable[[requests.Response], bool] = lambda r: True) -> bool:
    """Poll ``url`` every 50 ms until an answer satisfies ``answered`` (True), ``proc`` exits or ``timeout`` s
    pass (False): how every server this project starts (targets, stand-ins, benchmarks' nginx) is awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            if answered(requests.get(url, timeout=0.5)):
                return True
        except requests.RequestException:
            pass
        time.sleep(0.05)
    return False


def stop_process(proc: subprocess.Popen, *, group: bool = False, kill: bool = False, grace: float = 10.0) -> None:
    """Stop a child (its process group with ``group``): SIGTERM, or SIGKILL with ``kill``; a child that outlives
    ``grace`` s is killed. One way for every server this project starts."""
    if proc.poll() is not None:
        return
    sig = signal.SIGKILL if kill else signal.SIGTERM
    try:
        os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL) if group else proc.kill()
        proc.wait(timeout=grace)


class ServedTarget:
    """``with ServedTarget(get_case("tickets"), policy="none") as t: t.url`` -> a live reference server.

    The server is a separate process (``python -m peakproof serve ...``) so it has its own
    GIL and can be killed and restarted on the same database (``restart()``).
    """

    def __init__(self, case: "Case | str", *, port: int | None = None, db: str | Path | None = None,
                 extra: Sequence[str] = (), startup_timeout: float = 20.0, **options: object) -> None:
        # A case's record (its path, its options' flags), or "providers": the provider simulator. Whoever has a
        # case's name looks it up first (peakproof.cases.get_case): nothing below the entry points does.
        if isinstance(case, str):
            if case != "providers":
                raise TargetError(f"ServedTarget({case!r}): expected a case (peakproof.cases.get_case({case!r})) "
                                  f"or 'providers'")
            self.path, self._flags = "", {o.name: o.cli_flag for o in SHARED}
        else:
            self.path, self._flags = case.path, {o.name: o.cli_flag for o in (*SHARED, *case.options)}
            case = case.name
        self.case = case
        self.port = port or free_port()
        self._tmp = None
        if db is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"peakproof-{case}-")
            db = Path(self._tmp.name) / f"{case}.sqlite3"
        self.db = Path(db)
        self.options = options
        self.extra = list(extra)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix=f"peakproof-{case}-", suffix=".log")[1])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base + self.path

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "peakproof", "serve", self.case, "--host", "127.0.0.1",
               "--port", str(self.port), "--db", str(self.db)]
        flags = self._flags
        for k, v in self.options.items():
            if v is not None:
                cmd += [flags.get(k, f"--{k.replace('_', '-')}"), str(v)]
        return cmd + self.extra

    def start(self) -> "ServedTarget":
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        if wait_until_answering(self.url + "/health", self.startup_timeout, proc=self.proc,
                                answered=lambda r: r.status_code == 200):
            return self
        if self.proc.poll() is not None:
            raise TargetError(f"the {self.case} target exited with {self.proc.returncode} while starting:\n"
                              + self.log.read_text(errors="replace")[-2000:])
        self.stop()
        raise TargetError(f"the {self.case} target did not answer on {self.url}/health within "
                          f"{self.startup_timeout} s; log: {self.log}")

    def stop(self, kill: bool = False) -> None:
        if self.proc is not None:
            stop_process(self.proc, group=True, kill=kill)

    def restart(self, kill: bool = True) -> "ServedTarget":
        """Stop (SIGKILL by default: a crash, not a clean shutdown) and start on the same db."""
        self.stop(kill=kill)
        return self.start()

    def __enter__(self) -> "ServedTarget":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
        self.log.unlink(missing_ok=True)
