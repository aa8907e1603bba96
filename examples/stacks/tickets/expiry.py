"""The shop's expiry job, a process of its own: every ``--every`` seconds it releases the holds whose
window has passed (``db.release_lapsed``). Until it has run, a lapsed hold still counts as held and
can still be purchased: the shop's documented lag is the job's period plus its run, stated to
peakproof as ``--release-lag 3``.

    TICKETS_DSN=postgresql://... python -m examples.stacks.tickets.expiry --every 1
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import psycopg

from . import db


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="release lapsed holds every N seconds")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between runs (default 1)")
    args = ap.parse_args(argv)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    print(f"expiry job: releasing lapsed holds every {args.every:g} s", flush=True)
    next_run = time.monotonic()
    while not stopping:
        try:
            released = db.release_lapsed()
            if released:
                print(f"{time.strftime('%H:%M:%S')} released {released} lapsed hold(s)", flush=True)
        except psycopg.Error as e:  # the database went away for a moment: the next run tries again
            print(f"{time.strftime('%H:%M:%S')} expiry run failed: {e}", flush=True)
        next_run += args.every
        while not stopping and time.monotonic() < next_run:
            time.sleep(min(0.1, max(0.0, next_run - time.monotonic())))
        if time.monotonic() > next_run + args.every:  # fell behind (a long run): start the count again
            next_run = time.monotonic()
    return 0


if __name__ == "__main__":
    sys.exit(main())
