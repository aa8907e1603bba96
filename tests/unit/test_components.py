"""Discovery of the target's components (peakproof.components.discover), on made-up process tables and
socket maps: what a connection leads to, what it never pulls in."""

from __future__ import annotations

from peakproof.components import SocketMap, discover, stated_pids


def system() -> tuple[dict[int, int], dict[int, str], SocketMap]:
    """A shell (10) that started a run (20, its generator 21) and a stack: gunicorn 100 (workers 101, 102) on
    port 8000, Redis 200 on 6379, PostgreSQL 300 (backends 301, 302) on a Unix socket, two Celery workers
    (400, child 401) that meet the web only through Redis, a job runner 500 on PostgreSQL, the harness's
    provider simulator 600 on 9000 (called by the web), and an unrelated process 700."""
    parents = {10: 1, 20: 10, 21: 20, 100: 10, 101: 100, 102: 100, 200: 10, 300: 10, 301: 300, 302: 300,
               400: 10, 401: 400, 500: 10, 600: 10, 700: 1}
    comms = {10: "bash", 20: "peakproof", 21: "locust", 100: "gunicorn", 101: "gunicorn", 102: "gunicorn",
             200: "redis-server", 300: "postgres", 301: "postgres", 302: "postgres", 400: "celery", 401: "celery",
             500: "expiry", 600: "providers", 700: "sshd"}
    sm = SocketMap()
    inode = iter(range(1000, 2000))

    def own(pid: int, ino: int) -> None:
        sm.owners.setdefault(ino, set()).add(pid)
        sm.pid_inodes.setdefault(pid, set()).add(ino)

    def listen(pid: int, port: int | None) -> None:
        ino = next(inode)
        own(pid, ino)
        sm.listening.add(ino)
        sm.server_side.add(ino)
        if port:
            sm.listening_ports.setdefault(port, set()).add(ino)

    def connect(client: int, server: int) -> None:
        a, b = next(inode), next(inode)
        own(client, a)
        own(server, b)
        sm.peers[a], sm.peers[b] = b, a
        sm.server_side.add(b)

    listen(100, 8000)
    listen(200, 6379)
    listen(300, None)  # a Unix socket's listener
    listen(600, 9000)
    for worker in (101, 102):
        connect(worker, 200)  # the web enqueues
        connect(worker, 301)  # and reads the database
        connect(worker, 600)  # and calls the providers (the harness's)
    connect(21, 101)  # the generator, a client of the URL
    connect(401, 200)  # the Celery worker's child consumes the queue
    connect(401, 302)
    connect(500, 302)  # the job runner
    connect(700, 200)  # an unrelated client of Redis... is pulled in: a client of the target's broker
    return parents, comms, sm


def test_a_connection_leads_to_the_server_tree_and_its_other_clients() -> None:
    parents, comms, sm = system()
    found = discover(parents, comms, sm, [100], never={20, 10}, exclude_ports=[9000])
    how = {pid: c.how for pid, c in found.items()}
    assert {100, 101, 102} <= set(found) and how[101] == "serves the URL"
    assert how[200] == "connected from gunicorn"  # Redis
    assert how[300] == how[301] == how[302] == "connected from gunicorn"  # the postmaster's whole tree
    assert how[400] == how[401] == "a client of redis-server"  # the Celery worker and its child
    assert how[500] == "a client of postgres"  # the job runner


def test_the_run_its_starters_and_the_harnesss_helpers_are_never_the_target() -> None:
    parents, comms, sm = system()
    found = discover(parents, comms, sm, [100], never={20, 10}, exclude_ports=[9000])
    assert not {10, 20, 21, 600} & set(found), found  # the shell, the run, its generator, the provider simulator
    # without the helper's port stated, the provider simulator the web calls would be taken for a component
    assert 600 in discover(parents, comms, sm, [100], never={20, 10})


def test_hops_bound_how_far_discovery_goes() -> None:
    parents, comms, sm = system()
    one = discover(parents, comms, sm, [100], never={20, 10}, exclude_ports=[9000], hops=1)
    assert 200 in one and 400 not in one  # the broker, but not its workers: two hops away


def test_what_the_user_states_is_the_targets_and_said_to_be_stated() -> None:
    parents, comms, sm = system()
    stated = {700: "stated: --target-process sshd"}
    found = discover(parents, comms, sm, [100], never={20, 10}, stated=stated, exclude_ports=[9000])
    assert found[700].stated and not found[200].stated
    # a PID that names the run's root is never taken, even when stated
    assert stated_pids(comms, ["20"], never={20}) == {}
    assert stated_pids(comms, ["700"]) == {700: "stated: --target-process 700"}
