"""Start the ticket shop's whole stack: PostgreSQL, the schema, the expiry job, gunicorn.

    python -m examples.stacks.tickets [--defect check-then-act] [--holds-never-lapse] [--folder DIR] [--port N]

Prints ``listening on http://127.0.0.1:PORT/shop/api`` once every component answers, and stops them
all (gunicorn and the job first, then PostgreSQL) on SIGTERM or Ctrl-C. A component that cannot
start is named, with its log, and the launcher exits 3.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from examples.stacks.infra import ComponentFailed, Stack, free_port, new_folder, serve_forever

from .app import DEFECTS

ROOT = Path(__file__).resolve().parents[3]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.stacks.tickets", description=__doc__.split("\n")[0])
    ap.add_argument("--defect", choices=DEFECTS, help="start the broken variant (check-then-act: oversells)")
    ap.add_argument("--holds-never-lapse", action="store_true",
                    help="the variant of its own design: a hold lasts until it is paid or cancelled (its expires_at "
                         "ten years ahead) and no expiry job runs; state it to peakproof as --holds-never-lapse")
    ap.add_argument("--folder", help="the stack's folder (database, logs); default: a new one under .peakproof/stacks")
    ap.add_argument("--port", type=int, default=0, help="gunicorn's port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    ap.add_argument("--threads", type=int, default=4, help="threads per worker (gthread; default 4)")
    ap.add_argument("--expiry-every", type=float, default=1.0, help="s between runs of the expiry job (default 1)")
    ap.add_argument("--admin-key", default="shop-admin-key", help="the X-Shop-Admin key that sets events up")
    ap.add_argument("--slow-query", type=float, default=0.0, metavar="MS",
                    help="each reservation first spends MS milliseconds in the database (pg_sleep), before the row "
                         "lock: a shop that misses its latency limit at any rate, correct otherwise (default 0)")
    ap.add_argument("--cpu-per-request", type=float, default=0.0, metavar="MS",
                    help="each reservation first computes for MS milliseconds of CPU in its gunicorn worker: a shop "
                         "slow on its own CPU (a neighbour taking that CPU makes its miss undecided) (default 0)")
    ap.add_argument("--database", metavar="DSN",
                    help="use this PostgreSQL (a libpq URI; one other applications may share) instead of starting one")
    args = ap.parse_args(argv)

    folder = new_folder("tickets" + (f"-{args.defect}" if args.defect else "")
                        + ("-holds-never-lapse" if args.holds_never_lapse else ""), args.folder)
    stack = Stack(folder)
    try:
        dsn = args.database or stack.postgres()
        from .db import create_schema

        try:
            create_schema(dsn)
        except Exception as exc:
            raise ComponentFailed(f"PostgreSQL: the schema could not be created: {exc}") from exc
        env = {"TICKETS_DSN": dsn, "TICKETS_ADMIN_KEY": args.admin_key, "TICKETS_DEFECT": args.defect or "",
               "TICKETS_SLOW_QUERY_MS": str(args.slow_query),
               "TICKETS_CPU_PER_REQUEST_MS": str(args.cpu_per_request), "PYTHONPATH": str(ROOT),
               "TICKETS_HOLDS_NEVER_LAPSE": "1" if args.holds_never_lapse else ""}
        if not args.holds_never_lapse:  # nothing lapses: no job to release lapsed holds
                stack.start("expiry", [sys.executable, "-m", "examples.stacks.tickets.expiry", "--every",
                                   str(args.expiry_every)], env=env, cwd=ROOT)
        port = args.port or free_port()
        stack.gunicorn("examples.stacks.tickets.app:app", port, args.workers, env, ROOT, threads=args.threads)
        stack.check_alive()
    except ComponentFailed as exc:
        print(f"tickets stack did not start: {exc} (folder {folder})", file=sys.stderr, flush=True)
        stack.close()
        return 3
    except BaseException:
        stack.close()
        raise
    print(f"stack folder {folder} (logs: gunicorn.log, expiry.log, pg/log); defect: {args.defect or 'none'}; holds "
          + ("never lapse (no expiry job)" if args.holds_never_lapse else f"lapse (expiry job every {args.expiry_every:g} s)"),
          flush=True)
    serve_forever(stack, f"http://127.0.0.1:{port}/shop/api")
    return 0


if __name__ == "__main__":
    sys.exit(main())
