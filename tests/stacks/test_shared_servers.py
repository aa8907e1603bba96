"""A shop on a database server, and a notifications service on a broker, that another application also uses
and keeps busy during the load: the other application is never the target's, the shared server is named with
it, and its CPU never FAILs the target (peakproof.components: a server shared with others)."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from examples.stacks.infra import Stack
from tests.support.runs import ROOT, peakproof, providers, started, verdict_of

TENANT = ROOT / "tests" / "support" / "other_tenant.py"


@contextmanager
def other_tenant(folder: Path, *server: str) -> Iterator[int]:
    """Another application on ``server`` (--postgres URI | --redis URL), in a folder of its own, busy; its pid."""
    folder.mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, str(TENANT), *server, "--seconds", "240"], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.strip() == "busy", f"the other application did not start: {line}{proc.stdout.read()}"  # type: ignore[union-attr]
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


def the_target(stage: str) -> str:
    """A stage line's "the target: ..." part, up to what discovery left outside it."""
    return stage.split("the target:")[1].split("; a server shared with others")[0].split("; the target's processes")[0]


def components_named(target: str) -> list[str]:
    """The component names of a "the target: ..." part, its parentheses (how each was found) left out: a label
    names the server a component was reached through ("a client of redis-server"), which is not a component."""
    return re.findall(r"(?:^|, )\s*([\w.+-]+) x\d+", re.sub(r"\([^()]*\)", "", target))


def stage_line(out: subprocess.CompletedProcess[str], scenario: str) -> str:
    return next((line for line in out.stdout.splitlines() if line.startswith(f"peakproof: {scenario}: CPU")),
                "no stage line: " + verdict_of(out))


def test_a_second_application_busy_on_the_shops_postgresql_is_neither_the_target_nor_its_fail(tmp_path: Path) -> None:
    db = Stack(tmp_path / "db")
    (tmp_path / "db").mkdir()
    try:
        uri = db.postgres()
        with started("-m", "examples.stacks.tickets", "--folder", str(tmp_path / "shop"), "--database", uri) as url, \
                other_tenant(tmp_path / "other", "--postgres", uri) as pid:
            out = peakproof("run", "tickets", "--driver", "examples/stacks/tickets/driver.py:PgTicketShop",
                            "--target-url", url, "--admin-token", "shop-admin-key", "--release-lag", "3",
                            "--scale", "0.01", "--calibrated-rate", "1000", "--hold-window", "0.3",
                            "--skip-properties", "--report-dir", str(tmp_path / "reports"), timeout=300, again=False)
    finally:
        db.close()
    verdict, stage = verdict_of(out), stage_line(out, "tickets-opening")
    print(stage)  # what the user read (pytest -rP)
    # whatever the other application's CPU did to the shop's latency, it is not the shop's FAIL
    assert out.returncode in (0, 2) and "[FAIL]" not in verdict, verdict
    target = the_target(stage)
    assert {"gunicorn", "postgres"} <= set(components_named(target)), stage  # postgres: backends serving the shop
    assert "serves gunicorn's connections" in target, stage
    assert "expiry x1" in target and "kin: started by tickets" in target, stage  # the shop's job: its launcher's
    assert "other_tenant.py" not in target and str(pid) not in target, stage
    assert f"a server shared with others: postgres x" in stage and f"other_tenant.py {pid}" in stage, stage


def test_a_second_application_busy_on_the_services_redis_is_neither_the_target_nor_its_fail(tmp_path: Path) -> None:
    broker = Stack(tmp_path / "broker")
    (tmp_path / "broker").mkdir()
    try:
        redis_url = broker.redis()
        with providers() as prov, \
                started("-m", "examples.stacks.notifications", "--provider-url", prov, "--folder",
                        str(tmp_path / "beacon"), "--redis", redis_url) as url, \
                other_tenant(tmp_path / "other", "--redis", redis_url) as pid:
            out = peakproof("run", "notifications", "--driver", "examples/stacks/notifications/driver.py:Beacon",
                            "--target-url", url, "--provider-url", prov, "--budget", "3", "--backoff", "0.5",
                            "--answer-timeout", "0.5", "--breaker-window", "20", "--breaker-failures", "8",
                            "--breaker-cool-down", "3", "--suppression-list", "--scale", "0.05", "--duration", "5",
                            "--calibrated-rate", "1000", "--skip-properties",
                            "--report-dir", str(tmp_path / "reports"), timeout=300, again=False)
    finally:
        broker.close()
    verdict, stage = verdict_of(out), stage_line(out, "notifications-peak")
    print(stage)  # what the user read (pytest -rP)
    assert out.returncode in (0, 2) and "[FAIL]" not in verdict, verdict
    target = the_target(stage)
    assert "redis-server" not in components_named(target), stage  # shared: not the service's
    assert "celery x" in target and "kin: started by notifications" in target, stage  # reached through it, but kin
    assert "other_tenant.py" not in target and str(pid) not in target, stage
    assert "a server shared with others: redis-server x1" in stage and f"other_tenant.py {pid}" in stage, stage


# -- a harness user who cannot read the database's processes ------------------------------------------------------

DB_USER, APP_USER = "peakproof-db", "peakproof-app"


def a_user(name: str) -> tuple[int, int]:
    """A system user of that name (made once); its uid and gid."""
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                       capture_output=True, timeout=30)
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def as_user(ids: tuple[int, int]) -> list[str]:
    return ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups", "--"]


def a_python_for_everyone(folder: Path) -> str:
    """An interpreter another user may run, with this one's packages: this machine's Python may live where only
    root can reach (/root/.pyenv), so a venv of the system's python3.11 that adds this venv's site-packages."""
    import sysconfig

    from tests.support.skips import skip

    system = Path("/usr/bin/python3.11")
    if not system.exists() or sys.version_info[:2] != (3, 11):
        skip("platform", "needs the system's /usr/bin/python3.11 beside a Python 3.11 venv")
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True,
                   timeout=120)
    site = next(folder.glob("lib/python3.11/site-packages"))
    (site / "peakproof-venv.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return str(folder / "bin" / "python3")


def test_a_user_who_cannot_read_the_database_is_told_what_the_verdict_could_not_see() -> None:
    import os
    import shutil
    import tempfile

    from pgserver._commands import POSTGRES_BIN_PATH  # type: ignore[import-not-found]

    from examples.stacks.infra import free_port, wait_for_port
    from tests.support.skips import skip

    if os.geteuid() != 0:
        skip("platform", "making a database user and a harness user of their own needs root")
    db, app = a_user(DB_USER), a_user(APP_USER)
    # PostgreSQL runs as its own user, on 127.0.0.1 (as a distribution's package runs it as "postgres")
    data = Path(tempfile.mkdtemp(prefix="peakproof-pgdata-"))
    os.chown(data, *db)
    home = Path(tempfile.mkdtemp(prefix="peakproof-app-"))  # pytest's own folders are root's alone (0700)
    os.chown(home, *app)
    port = free_port()
    subprocess.run([*as_user(db), str(POSTGRES_BIN_PATH / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth=trust"], check=True, capture_output=True, timeout=120)
    postgres = subprocess.Popen([*as_user(db), str(POSTGRES_BIN_PATH / "postgres"), "-D", str(data), "-h", "127.0.0.1",
                                 "-p", str(port), "-k", ""], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    python = a_python_for_everyone(home / "venv")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT), "HYPOTHESIS_PROFILE": "dev"}
    shop = None
    try:
        wait_for_port(port, 60, postgres, "postgres")
        # the shop and the harness both run as the harness's user, who cannot read the database's /proc/PID/fd
        shop = subprocess.Popen([*as_user(app), python, "-m", "examples.stacks.tickets", "--folder",
                                 str(home / "shop"), "--database", f"postgresql://postgres@127.0.0.1:{port}/postgres"],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        said = []
        for line in shop.stdout:  # type: ignore[union-attr]
            said.append(line)
            if line.startswith("listening on"):
                break
        assert said and said[-1].startswith("listening on"), "".join(said)
        url = said[-1].split()[-1]
        out = subprocess.run([*as_user(app), python, "-m", "peakproof", "run", "tickets", "--driver",
                              f"{ROOT}/examples/stacks/tickets/driver.py:PgTicketShop", "--target-url", url,
                              "--admin-token", "shop-admin-key", "--release-lag", "3", "--scale", "0.01",
                              "--calibrated-rate", "1000", "--hold-window", "0.3", "--skip-properties",
                              "--report-dir", str(home / "reports")],
                             cwd=home, env=env, capture_output=True, text=True, timeout=300)
    finally:
        if shop is not None:
            shop.terminate()
            shop.wait(30)
        postgres.terminate()
        postgres.wait(30)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    verdict = verdict_of(out)
    print(verdict)  # what the user read (pytest -rP)
    assert "peakproof verdict for tickets" in verdict, out.stdout[-3000:] + out.stderr[-3000:]
    said_of = f"to 127.0.0.1:{port}, served by a process this user cannot read: state it with --target-process"
    assert said_of in verdict, verdict
    assert "[FAIL]" not in verdict, verdict
