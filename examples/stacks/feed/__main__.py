"""Start the feed stack: PostgreSQL, ``migrate``, gunicorn with real worker processes.

    python -m examples.stacks.feed [--design pull|fanout-worker] [--defect page-numbers|delete-lost-to-fanout]
                                   [--folder DIR] [--port N] [--workers 3]

``--design fanout-worker`` also starts the fan-out worker (``fanout_worker.py``, its log ``fanout-worker.log``).

Prints ``listening on http://127.0.0.1:PORT/api`` once gunicorn serves, and stops everything
(gunicorn, then PostgreSQL) on SIGTERM / SIGINT. Run it from the repository's root (the
Django project is the package ``examples.stacks.feed``). The stack's folder (PostgreSQL's
data, ``migrate.log``, ``gunicorn.log``) is ``--folder``, kept, or a fresh one under
``.peakproof/stacks/``.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from examples.stacks.infra import ComponentFailed, Stack, free_port, new_folder, serve_forever

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = "examples.stacks.feed.settings"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.stacks.feed", description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=["pull", "fanout-worker"], default="pull",
                        help="pull (default): actstream's stream merged on read; fanout-worker: fan-out on write by "
                             "a worker process, which also applies deletes and unfollows")
    parser.add_argument("--defect", choices=["page-numbers", "delete-lost-to-fanout"],
                        help="page-numbers (pull): Django's Paginator with ?page=N (skips and repeats posts); "
                             "delete-lost-to-fanout (fanout-worker): the worker writes a post deleted right after "
                             "it was published back into its followers' timelines")
    parser.add_argument("--worker-poll", type=float, default=0.1,
                        help="s the fan-out worker waits when it finds no job (default 0.1; its lag is about that)")
    parser.add_argument("--folder", help="the stack's folder, kept (default: a fresh one under .peakproof/stacks/)")
    parser.add_argument("--port", type=int, default=0, help="gunicorn's port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn worker processes (default 3)")
    args = parser.parse_args()
    if args.defect and {"page-numbers": "pull", "delete-lost-to-fanout": "fanout-worker"}[args.defect] != args.design:
        parser.error(f"--defect {args.defect} is a defect of the other design (--design {args.design})")

    folder = new_folder("feed", args.folder)
    stack = Stack(folder)
    try:
        database = stack.postgres()
        env = {"DJANGO_SETTINGS_MODULE": SETTINGS, "FEED_DATABASE_URL": database,
               "FEED_PAGINATION": "page-numbers" if args.defect == "page-numbers" else "keyset",
               "FEED_DESIGN": args.design, "FEED_DEFECT": args.defect if args.design == "fanout-worker" and args.defect
               else "", "FEED_SECRET_KEY": secrets.token_hex(32),
               "PYTHONPATH": str(ROOT),
               # gunicorn 23+ opens a control socket at one fixed path in $HOME: stacks side by side
               # (and other projects' gunicorns) would fight over it; this stack does not use it
               "GUNICORN_CMD_ARGS": "--no-control-socket", "FEED_WORKER_POLL": str(args.worker_poll)}
        migrate(stack, env)
        port = args.port or free_port()
        if args.design == "fanout-worker":  # a component like gunicorn: watched, stopped with the stack
            stack.start("fanout-worker", [sys.executable, "-m", "examples.stacks.feed.fanout_worker"], env=env,
                        cwd=ROOT)
        proc = stack.gunicorn("examples.stacks.feed.wsgi:application", port, args.workers, env, cwd=ROOT)
        wait_for_health(stack, proc, f"http://127.0.0.1:{port}/api/health/")
    except BaseException:
        stack.close()
        raise
    serve_forever(stack, f"http://127.0.0.1:{port}/api")


def migrate(stack: Stack, env: dict[str, str]) -> None:
    proc = stack.start("migrate", [sys.executable, "-m", "django", "migrate", "--noinput"], env=env, cwd=ROOT)
    try:
        code = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise ComponentFailed(f"migrate did not finish within 120 s (its log: {stack.folder / 'migrate.log'})")
    stack.processes.remove(("migrate", proc))  # done: not a process to watch
    if code != 0:
        raise ComponentFailed(f"migrate exited with {code} (its log: {stack.folder / 'migrate.log'})")


def wait_for_health(stack: Stack, proc: subprocess.Popen, url: str, timeout: float = 60) -> None:
    """Ready when the feed itself answers its health check: an open port alone may be another
    process's (gunicorn then exits, unable to bind), and the first request loads Django."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ComponentFailed(f"gunicorn exited with {proc.returncode} (its log: {stack.folder / 'gunicorn.log'})")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if json.loads(answer.read()).get("ok") is True:
                    return
        except (OSError, ValueError, AttributeError) as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.2)
    raise ComponentFailed(f"the feed did not answer {url} within {timeout:.0f} s ({last}; gunicorn's log: "
                          f"{stack.folder / 'gunicorn.log'})")


if __name__ == "__main__":
    try:
        main()
    except ComponentFailed as e:
        print(f"the feed stack stopped: {e}", file=sys.stderr, flush=True)  # which component, why, its log
        sys.exit(3)
