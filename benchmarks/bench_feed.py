"""Benchmark: the feed reference core in process, on the seed's graph at a scale.

Prints the figures the seed's design rests on, measured on our core (no HTTP):
- fan-out: inbox writes/s one consumer drains (the seed sizes capacity at 3x steady);
- reads: first-page latency p50 / p99 through the inbox plus the above-threshold merge,
  and degraded (a shard down: fan-in over every followee);
- G3: bytes an inbox entry costs here (tracemalloc) against the seed's 32 B (VH7), and the
  inbox store that would make at 1,000,000 users x 400 entries (the seed: 12.80 GB).

    python benchmarks/bench_feed.py [--scale 0.01] [--posts-per-user 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peakproof.cases.feed import FeedWorkload  # noqa: E402
from peakproof.targets.feed import FeedCore  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.01, help="users = 1,000,000 x scale (default 10,000)")
    p.add_argument("--posts-per-user", type=float, default=1.0, help="posts published before measuring")
    args = p.parse_args()
    w = FeedWorkload(args.scale)
    pairs, _ = w.graph()
    clock = [1.0]
    core = FeedCore(lambda: clock[0], threshold=w.threshold)
    t0 = time.perf_counter()
    core.follow_many(pairs)
    print(f"graph: {w.users:,} users + {w.newcomers:,} newcomers, {len(pairs):,} follows in "
          f"{time.perf_counter() - t0:.2f} s; threshold {w.threshold:,} (the seed's rule at this scale)")

    rnd = random.Random(7)
    n_posts = round(w.population * args.posts_per_user)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(n_posts):
        clock[0] += 0.001
        core.publish(w.user(rnd.randrange(w.population)), f"post {i}")
    queued = core.backlog()
    t0 = time.perf_counter()
    core.fanout()
    fan = time.perf_counter() - t0
    entries = sum(len(v) for v in core.inboxes.values())
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    posts_bytes = 0  # posts are counted in 'after' too; estimate them apart to isolate inboxes
    sample = FeedCore(lambda: 1.0, threshold=w.threshold)
    tracemalloc.start()
    b0 = tracemalloc.get_traced_memory()[0]
    for i in range(2_000):
        sample.publish(f"a{i % 50}", f"post {i}")
    posts_bytes = (tracemalloc.get_traced_memory()[0] - b0) / 2_000 * n_posts
    tracemalloc.stop()
    per_entry = (after - before - posts_bytes) / max(1, entries)
    print(f"fan-out: {queued:,} inbox writes for {n_posts:,} posts in {fan:.2f} s = {queued / fan:,.0f} writes/s "
          f"on one consumer (capacity the seed asks at this scale, uncompressed: {w.capacity:,.2f}/s)")
    print(f"G3: {entries:,} inbox entries, about {per_entry:.0f} B each in this Python core (the seed: 32 B): an "
          f"entry is a pointer to its post's one (timestamp, id) key, which lives with the post; 1,000,000 users x "
          f"400 entries would take {per_entry * 400e6 / 1e9:,.1f} GB of inboxes here (the seed: "
          f"{400e6 * 32 / 1e9:.2f} GB; G3 allows 20 GB)")

    users = [w.user(rnd.randrange(w.population)) for _ in range(5_000)]
    for label, down in (("healthy", []), ("shard 0 down", [0])):
        for s in range(core.shards):
            core.set_shard_down(s, s in down)
        lat = []
        for u in users:
            t0 = time.perf_counter()
            core.read_view(u, 20)
            lat.append(time.perf_counter() - t0)
        lat.sort()
        print(f"first page ({label}): p50 {statistics.median(lat) * 1e3:.3f} ms  p99 {lat[int(0.99 * len(lat))] * 1e3:.3f} ms"
              f"  ({len(lat):,} reads in process; G1 allows 200 ms over HTTP)")


if __name__ == "__main__":
    main()
