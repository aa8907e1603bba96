"""Another application on the same database server or broker as the target: it burns CPU in its own queries
(PostgreSQL: a sum over generate_series; Redis: a Lua loop) until it is stopped or ``--seconds`` pass.

    python tests/support/other_tenant.py --postgres URI | --redis URL [--seconds S] [--connections N]

Prints ``busy`` once its first query came back. Started in a folder of its own by the process that runs the
test (never the target's launcher): nothing ties it to the target but the shared server."""

from __future__ import annotations

import argparse
import threading
import time

PG_QUERY = "SELECT sum(sqrt(g)) FROM generate_series(1, 400000) g"  # about 40 ms of a backend's CPU
REDIS_SCRIPT = "local x = 0 for i = 1, 300000 do x = x + i end return x"  # about 10 ms of redis-server's CPU


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--postgres", metavar="URI")
    ap.add_argument("--redis", metavar="URL")
    ap.add_argument("--seconds", type=float, default=180.0, help="stop after this long at most (180)")
    ap.add_argument("--connections", type=int, default=2, help="connections querying side by side (2)")
    ap.add_argument("--pause", type=float, default=0.02, help="s between one connection's queries (0.02)")
    args = ap.parse_args()
    if not (args.postgres or args.redis):
        ap.error("give --postgres URI or --redis URL")
    deadline = time.monotonic() + args.seconds
    first = threading.Event()

    def work() -> None:
        if args.postgres:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as c:
                while time.monotonic() < deadline:
                    c.execute(PG_QUERY).fetchone()
                    first.set()
                    time.sleep(args.pause)
        else:
            import redis

            r = redis.Redis.from_url(args.redis)
            while time.monotonic() < deadline:
                r.eval(REDIS_SCRIPT, 0)
                first.set()
                time.sleep(args.pause)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(args.connections)]
    for t in threads:
        t.start()
    first.wait(60)
    print("busy", flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
