"""The reference targets' background loops never swallow an exception: they log it, count it
where the harness can see it, keep serving, and never leave a failing job at the head of
their queue."""

from __future__ import annotations

import time

import pytest

from peakproof.clock import VirtualClock
from peakproof.targets._background import LoopHealth
from peakproof.targets.feed import FeedCore
from peakproof.targets.feed.core import MAX_JOB_ATTEMPTS, FanoutJobFailed


def test_a_fan_out_job_that_keeps_failing_is_dead_lettered_and_the_queue_moves_on() -> None:
    core = FeedCore(VirtualClock(), threshold=10)
    for user in ("ok-1", "bad", "ok-2"):
        core.follow(user, "author")
    real_write = core._write

    def write(user: str, key: tuple[float, str]) -> None:
        if user == "bad":
            raise OSError("inbox shard unreachable")
        real_write(user, key)

    core._write = write  # type: ignore[method-assign]
    post = core.publish("author", "hello")
    for attempt in range(1, MAX_JOB_ATTEMPTS + 1):
        with pytest.raises(FanoutJobFailed, match=f"attempt {attempt} of {MAX_JOB_ATTEMPTS}"):
            core.fanout()
    assert not core.queue and core.backlog() == 0
    [dead] = core.dead_letters
    assert dead["post_id"] == post.post_id and dead["error"] == "OSError: inbox shard unreachable"
    assert dead["writes_lost"] >= 1
    later = core.publish("author", "the next post is not stuck behind it")
    core._write = lambda user, key: real_write(user, key) if user != "bad" else None  # type: ignore[method-assign]
    assert core.fanout() > 0 and not core.queue
    assert later.key in core.inboxes["ok-1"]


def test_a_raising_supervisor_is_counted_and_keeps_running() -> None:
    from peakproof.targets.tickets.app import Supervisor

    class Broken:
        calls = 0

        def release_expired(self) -> None:
            Broken.calls += 1
            raise RuntimeError("database is locked")

    health = LoopHealth()
    sup = Supervisor(Broken(), interval=0.01, health=health).start()  # type: ignore[arg-type]
    try:
        deadline = time.monotonic() + 5
        while health.errors.get("expiry-supervisor", 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sup.stop()
    snap = health.snapshot()
    assert snap["loop_errors"]["expiry-supervisor"] >= 3  # still looping after the first failure
    assert snap["last_loop_error"]["expiry-supervisor"]["error"] == "RuntimeError: database is locked"
