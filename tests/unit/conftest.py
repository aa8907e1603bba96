"""The unit tier: no process, no socket. Every test here runs in this process on its own data
(histories by hand, cores in virtual time, the models); a test that starts a child process or
opens a socket fails, naming what it did, and belongs in ``tests/served/`` or ``tests/e2e/``."""

from __future__ import annotations

import socket
import subprocess
from typing import Any, Iterator

import pytest


class NotAUnitTest(Exception):
    """A unit test reached for a process or a socket."""


def _refuse(what: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise NotAUnitTest(f"a unit test {what}: it belongs in tests/served/ (a server or a child process, "
                           f"no load) or tests/e2e/ (a load)")
    return refused


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # around the call only, undone in the order done: the serving guard in tests/conftest.py patches the
    # same attributes around each phase, and a fixture's teardown would restore its patch a phase late
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(socket.socket, "connect", _refuse("opened a connection"))
        mp.setattr(socket.socket, "connect_ex", _refuse("opened a connection"))
        mp.setattr(socket.socket, "bind", _refuse("bound a socket"))
        mp.setattr(subprocess.Popen, "__init__", _refuse("started a child process"))
        return (yield)
    finally:
        mp.undo()
