"""Discovery of the target's components (peakproof.components.discover), on made-up process tables and
socket maps: what a connection leads to, what it never pulls in."""

from __future__ import annotations

from peakproof.components import SocketMap, discover, explore, stated_pids


def system(neighbours: bool = False) -> tuple[dict[int, int], dict[int, str], SocketMap]:
    """A shell (10) that started a run (20, its generator 21) and a stack's launcher (50), which started: gunicorn
    100 (workers 101, 102) on port 8000, Redis 200 on 6379, PostgreSQL 300 (backends 301, 302) on a Unix socket,
    two Celery workers (400, child 401) that meet the web only through Redis, a job runner 500 on PostgreSQL; the
    harness's provider simulator 600 on 9000 (called by the web), and an unrelated process 700.
    ``neighbours``: another application, started by init in a folder of its own, uses the same servers: its web
    process 800 (a backend 303 of its own) and its worker 810 on the same Redis."""
    parents = {10: 1, 20: 10, 21: 20, 50: 10, 100: 50, 101: 100, 102: 100, 200: 50, 300: 50, 301: 300, 302: 300,
               400: 50, 401: 400, 500: 50, 600: 10, 700: 1}
    comms = {10: "bash", 20: "peakproof", 21: "locust", 50: "tickets", 100: "gunicorn", 101: "gunicorn",
             102: "gunicorn", 200: "redis-server", 300: "postgres", 301: "postgres", 302: "postgres", 400: "celery",
             401: "celery", 500: "expiry", 600: "providers", 700: "sshd"}
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
    if neighbours:
        parents.update({800: 1, 303: 300, 810: 1})
        comms.update({800: "gunicorn", 303: "postgres", 810: "celery"})
        connect(800, 303)
        connect(800, 200)
        connect(810, 200)
    return parents, comms, sm


NEVER = {20, 10}  # the run and the shell that started it


def test_a_connection_leads_to_the_server_tree_and_its_other_clients() -> None:
    parents, comms, sm = system()
    found = discover(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000])
    how = {pid: c.how for pid, c in found.items()}
    assert {100, 101, 102} <= set(found) and how[101] == "serves the URL"
    assert how[200] == "connected from gunicorn"  # Redis: every client it serves is the target's
    assert how[300] == how[301] == how[302] == "connected from gunicorn"  # the postmaster's whole tree
    # the Celery worker and its child, the job runner: started by the stack's launcher, as gunicorn was
    assert how[400] == how[401] == "a client of redis-server; kin: started by tickets, as the target is"
    assert how[500] == "a client of postgres; kin: started by tickets, as the target is"
    assert 50 not in found  # the launcher itself serves nothing and talks to nothing


def test_of_a_database_another_application_also_uses_only_the_backends_serving_the_target_are_the_targets() -> None:
    parents, comms, sm = system(neighbours=True)
    seen = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000])
    found = seen.components
    assert {301, 302} <= set(found) and "connections" in found[301].how  # the target's own connections' backends
    assert not {300, 303, 800, 810} & set(found), found  # the postmaster, the other's backend, the other app
    postgres = next(s for s in seen.shared if s.comm == "postgres")
    assert postgres.pid == 300 and set(postgres.pids) == {300, 303} and postgres.others == ("gunicorn 800",)
    assert {400, 401, 500} <= set(found)  # the target's own worker and job still are


def test_a_shared_single_process_server_is_named_with_its_other_clients_and_is_not_the_targets() -> None:
    parents, comms, sm = system(neighbours=True)
    seen = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000])
    assert 200 not in seen.components
    redis = next(s for s in seen.shared if s.comm == "redis-server")
    assert redis.pids == (200,) and redis.others == ("celery 810", "gunicorn 800")
    assert "shared: it also serves celery 810, gunicorn 800" in redis.sentence()
    assert "--target-process redis-server" in redis.sentence()
    # stated, it is the target's all the same
    stated = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000],
                     stated={200: "stated: --target-process redis-server"})
    assert stated.components[200].stated and not any(s.comm == "redis-server" for s in stated.shared)


def test_a_process_reached_only_through_a_server_is_the_targets_only_when_kin() -> None:
    parents, comms, sm = system()
    parents.update({400: 1, 401: 400})  # the Celery worker started by init, in a folder of its own: no kin
    seen = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000], cwds={100: "/srv/shop",
                                                                                        400: "/srv/other"})
    assert 400 not in seen.components and 200 not in seen.components
    assert next(s for s in seen.shared if s.comm == "redis-server").others == ("celery 400",)
    # the same worker in the web's folder (two units of one application under a service manager) is kin
    kin = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000], cwds={100: "/srv/shop",
                                                                                       400: "/srv/shop"})
    assert kin.components[400].how == "a client of redis-server; kin: runs in the target's folder /srv/shop"
    assert kin.components[200].how == "connected from gunicorn" and not kin.shared
    # "/" is nobody's folder: two processes there are not kin for it
    root = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000], cwds={100: "/", 400: "/"})
    assert 400 not in root.components


def test_a_connection_to_a_server_this_user_cannot_read_is_said() -> None:
    parents, comms, sm = system()
    a, b, listener = 5001, 5002, 5003
    sm.owners.setdefault(a, set()).add(101)
    sm.pid_inodes.setdefault(101, set()).add(a)
    sm.peers[a], sm.peers[b] = b, a  # /proc/net/tcp shows both ends; /proc/PID/fd of the server is unreadable
    sm.server_side |= {b, listener}
    sm.listening.add(listener)
    sm.addresses.update({b: "127.0.0.1:5432", listener: "127.0.0.1:5432"})
    sm.listening_addresses["127.0.0.1:5432"] = {listener}
    seen = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000])
    assert len(seen.unseen) == 1, seen.unseen
    assert "gunicorn (pid 101) to 127.0.0.1:5432" in seen.unseen[0]
    assert "cannot read" in seen.unseen[0] and "--target-process" in seen.unseen[0]
    # a server that can be read: its connection that just closed is not said to be unreadable
    sm.owners[listener] = {300}
    assert not explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000]).unseen


def test_the_run_its_starters_and_the_harnesss_helpers_are_never_the_target() -> None:
    parents, comms, sm = system()
    found = discover(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000])
    assert not {10, 20, 21, 600} & set(found), found  # the shell, the run, its generator, the provider simulator
    # without the helper's port stated, the provider simulator the web calls would be taken for a component
    assert 600 in discover(parents, comms, sm, [100], never=NEVER)


def test_hops_bound_how_far_discovery_goes() -> None:
    parents, comms, sm = system()
    one = discover(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000], hops=1)
    assert 200 in one and 400 not in one  # the broker, but not its workers: two hops away


def test_what_the_user_states_is_the_targets_and_said_to_be_stated() -> None:
    parents, comms, sm = system()
    stated = {700: "stated: --target-process sshd"}
    found = discover(parents, comms, sm, [100], never=NEVER, stated=stated, exclude_ports=[9000])
    assert found[700].stated and not found[200].stated
    # a PID that names the run's root is never taken, even when stated
    assert stated_pids(comms, ["20"], never={20}) == {}
    assert stated_pids(comms, ["700"]) == {700: "stated: --target-process 700"}


def test_the_runs_own_processes_on_the_targets_database_neither_join_the_target_nor_share_the_server() -> None:
    parents, comms, sm = system()
    parents[22], comms[22] = 20, "locust"  # a generator of the run whose driver reads the database
    a, b = 5101, 5102
    sm.owners.setdefault(a, set()).add(22)
    sm.pid_inodes.setdefault(22, set()).add(a)
    sm.owners.setdefault(b, set()).add(302)
    sm.pid_inodes.setdefault(302, set()).add(b)
    sm.peers[a], sm.peers[b] = b, a
    sm.server_side.add(b)
    seen = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000], harness={20, 21, 22})
    assert 22 not in seen.components and not seen.shared  # the database is still the target's whole
    assert seen.components[300].how == "connected from gunicorn"
    # not said to be the harness's, the generator is another application on that server
    other = explore(parents, comms, sm, [100], never=NEVER, exclude_ports=[9000])
    assert next(s for s in other.shared if s.comm == "postgres").others == ("locust 22",)
