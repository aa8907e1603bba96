"""The guard in tests/conftest.py fires: a test that starts a server or a child process
without the marker that says so fails, naming the marker; a marked test is left alone."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import uvicorn

from peakproof.launch import ServedTarget

Refused = pytest.fail.Exception  # what the guard raises: the test fails with its message


@pytest.fixture(scope="module")
def listened_in_a_module_fixture() -> str | None:
    """A module fixture is set up inside the first test that asks for it: the guard is on there too."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        try:
            s.listen()
        except Refused as e:
            return str(e)
    return None


def test_an_unmarked_test_cannot_start_a_reference_server() -> None:
    t = ServedTarget("tickets")
    try:
        with pytest.raises(Refused, match=r"starts a server \(ServedTarget 'tickets'\): mark it @pytest\.mark\.http"):
            t.start()
        assert t.proc is None  # refused before anything was started
    finally:
        t.__exit__(None, None, None)


def test_an_unmarked_test_cannot_listen_on_a_socket_or_build_a_uvicorn_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        with pytest.raises(Refused, match=r"starts a server \(a socket listening on .*mark it @pytest\.mark\.http"):
            s.listen()
    with pytest.raises(Refused, match=r"starts a server \(uvicorn\.Server\): mark it @pytest\.mark\.http"):
        uvicorn.Server(None)  # type: ignore[arg-type]


def test_an_unmarked_test_cannot_start_a_child_process() -> None:
    with pytest.raises(Refused, match=r"starts a child process \(.*-c pass\): mark it @pytest\.mark\.slow"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(Refused, match=r"starts a child process that serves or drives load .*mark it @pytest\.mark\.http"):
        subprocess.Popen([sys.executable, "-m", "locust", "--version"])


def test_the_guard_covers_fixtures_set_up_for_an_unmarked_test(listened_in_a_module_fixture: str | None) -> None:
    assert listened_in_a_module_fixture is not None, "the module fixture's listen was not refused"
    assert "test_the_guard_covers_fixtures_set_up_for_an_unmarked_test starts a server" in listened_in_a_module_fixture
    assert "mark it @pytest.mark.http" in listened_in_a_module_fixture


@pytest.mark.slow
def test_a_slow_test_may_start_a_plain_child_process_but_not_one_that_serves() -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], timeout=60).returncode == 0
    with pytest.raises(Refused, match=r"serves or drives load \(.*tests\.support\.stall_target.*mark it @pytest\.mark\.http"):
        subprocess.Popen([sys.executable, "-m", "tests.support.stall_target", "0"])


@pytest.mark.http
def test_a_test_marked_http_may_listen() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with socket.create_connection(s.getsockname(), timeout=5):
            pass
