"""Start Beacon's whole stack: PostgreSQL, Redis, two Celery worker pools and gunicorn.

    python -m examples.stacks.notifications --provider-url http://127.0.0.1:8001 [--port 8000]
        [--defect visibility-timeout|replay-sends-twice] [--urgent-workers N] [--workers N] [--folder DIR]
        [--channels sms,email] [--one-channel] [--no-breaker]
        [--backoff S] [--backoff-after-permanent S] [--answer-timeout S]
        [--breaker-window N] [--breaker-failures N] [--breaker-cool-down S]

Prints ``listening on http://127.0.0.1:PORT/api/v2`` once every component is up; SIGTERM (or
Ctrl-C) stops them all. Logs and data are in the stack's folder (``--folder``, else a new one
under ``.peakproof/stacks/``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from examples.stacks.infra import ComponentFailed, Stack, free_port, new_folder, serve_forever

ROOT = Path(__file__).resolve().parents[3]
TASKS = "examples.stacks.notifications.tasks"


def wait_for_worker(stack: Stack, name: str, timeout: float = 60) -> None:
    """A Celery worker is up once its log says ``ready``."""
    log = stack.folder / f"{name}.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stack.check_alive()
        if log.exists() and " ready." in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise ComponentFailed(f"Celery worker {name} was not ready within {timeout:.0f} s (its log: {log})")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m examples.stacks.notifications", description=__doc__.split("\n")[0])
    p.add_argument("--provider-url", required=True, help="the providers (peakproof serve providers), http://127.0.0.1:P")
    p.add_argument("--port", type=int, default=0, help="gunicorn's port (0: a free one)")
    p.add_argument("--folder", help="the stack's folder (data and logs; kept). Default: a new one under .peakproof/stacks/")
    p.add_argument("--defect", choices=["visibility-timeout", "replay-sends-twice"],
                   help="a broken variant: visibility-timeout: Redis's visibility timeout shorter than a retry's "
                        "countdown (duplicate deliveries); replay-sends-twice: a replayed notify of a delivered "
                        "notification sends it again")
    p.add_argument("--channels", default="push,sms,email",
                   help="the channels this deployment has (push,sms,email); a preference for another is met on the "
                        "recipient's next choice. State it to peakproof as --channels")
    p.add_argument("--one-channel", action="store_true", help="one channel per notification (no cascade): the "
                   "recipient's first choice this deployment has; state it as --cascade none")
    p.add_argument("--no-breaker", action="store_true", help="no circuit breaker; state it as --no-breaker")
    p.add_argument("--workers", type=int, default=3, help="the default queue's worker processes (3)")
    p.add_argument("--urgent-workers", type=int, default=16,
                   help="the urgent queue's worker threads (16): each call waits on a provider up to the answer "
                        "timeout, so an unanswered call holds a thread, never the urgent pool")
    p.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (2, 4 threads each)")
    p.add_argument("--budget", type=int, default=3, help="provider calls per notification (3)")
    p.add_argument("--backoff", type=float, default=0.5, help="s before the next round after a transient failure (0.5)")
    p.add_argument("--backoff-after-permanent", type=float, default=0.2, help="s before the next round after a 422 (0.2)")
    p.add_argument("--answer-timeout", type=float, default=0.5, help="s a provider has to answer (0.5)")
    p.add_argument("--breaker-window", type=int, default=20, help="a channel's breaker looks at its last N calls (20)")
    p.add_argument("--breaker-failures", type=int, default=8, help="transient failures among them that open it (8)")
    p.add_argument("--breaker-cool-down", type=float, default=3.0, help="s open before a probe (3)")
    p.add_argument("--database", metavar="URI",
                   help="use this PostgreSQL (one other applications may share) instead of starting one")
    p.add_argument("--redis", metavar="URL", help="use this Redis (redis://127.0.0.1:P/N; one other applications may "
                   "share) instead of starting one")
    args = p.parse_args(argv)

    stack = Stack(new_folder("notifications", args.folder))
    try:
        database_url = args.database or stack.postgres()
        from examples.stacks.notifications import db

        db.migrate(database_url)
        env = {"BEACON_DATABASE_URL": database_url, "BEACON_REDIS_URL": args.redis or stack.redis(),
               "BEACON_PROVIDER_URL": args.provider_url, "BEACON_DEFECT": args.defect or "",
               "BEACON_BUDGET": str(args.budget), "BEACON_BACKOFF": str(args.backoff),
               "BEACON_BACKOFF_AFTER_PERMANENT": str(args.backoff_after_permanent),
               "BEACON_ANSWER_TIMEOUT": str(args.answer_timeout), "BEACON_BREAKER_WINDOW": str(args.breaker_window),
               "BEACON_BREAKER_FAILURES": str(args.breaker_failures),
               "BEACON_BREAKER_COOL_DOWN": str(args.breaker_cool_down), "PYTHONUNBUFFERED": "1",
               "BEACON_CHANNELS": args.channels, "BEACON_ONE_CHANNEL": "1" if args.one_channel else "",
               "BEACON_BREAKER": "" if args.no_breaker else "1",
               # keep idle client connections 75 s (gunicorn's default, 2 s, closes them under a client that
               # reuses one a moment later: a reset), as behind any load balancer with a 60 s idle timeout
               "GUNICORN_CMD_ARGS": "--keep-alive 75"}
        # The urgent pool is threads: its calls are I/O (a provider's answer, up to the answer timeout). With three
        # processes, three lost answers (the properties send three urgent notifications behind a flood) held the
        # whole pool 0.5 s while the reminders' pool went on: a reminder called 0.28 s ahead of an urgent one.
        for name, queue, pool, n in (("worker-default", "default", "prefork", args.workers),
                                     ("worker-urgent", "urgent", "threads", args.urgent_workers)):
            stack.start(name, [sys.executable, "-m", "celery", "-A", TASKS, "worker", "-Q", queue, "-n", f"{queue}@%h",
                               "--pool", pool, "--concurrency", str(n), "--loglevel", "INFO",
                               "--without-gossip", "--without-mingle", "--without-heartbeat"], env=env, cwd=ROOT)
        for name in ("worker-default", "worker-urgent"):
            wait_for_worker(stack, name)
        port = args.port or free_port()
        stack.gunicorn("examples.stacks.notifications.app:app", port, args.web_workers, env=env, cwd=ROOT, threads=4)
    except BaseException:
        stack.close()
        raise
    serve_forever(stack, f"http://127.0.0.1:{port}/api/v2")


if __name__ == "__main__":
    try:
        main()
    except ComponentFailed as e:
        print(f"a component did not start: {e}", file=sys.stderr, flush=True)
        sys.exit(3)
