"""The fanout-worker design's worker: a process of its own beside gunicorn (``python -m examples.stacks.feed
--design fanout-worker`` starts it), applying the jobs the web process leaves (``news/timelines.py``).

Every ``FEED_WORKER_POLL`` s (0.1) it claims a batch of jobs, oldest first, with ``SELECT ... FOR UPDATE SKIP
LOCKED`` (another worker would take the rest), reads the batch's posts once, and runs the batch on two threads:
the removals first (a delete takes the post's entries out of every timeline; an unfollow deletes the follow and
the author's entries in the follower's timeline), then the fan-outs (an entry for each follower whose follow
started before the post, and one for its author). The jobs are deleted in the claim's transaction, once done.

Order: a fan-out locks its post (``FOR UPDATE``) and re-reads its ``deleted`` flag in the transaction that writes
the entries, and a delete locks the same row: whichever comes second sees the first's work, so a delete never
loses to a fan-out. A fan-out holds its followers' follow rows (``FOR SHARE``), so an unfollow deleting one
waits for it and then removes what it wrote.

``FEED_DEFECT=delete-lost-to-fanout``: the fan-out trusts the post as the batch read it, at its start, and
writes without re-checking. A post deleted right after it was published (its delete job in the same batch, run
first) is written back to its followers' timelines after its delete ran: readable there for good.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

POLL = float(os.environ.get("FEED_WORKER_POLL", "0.1"))
BATCH = 100
THREADS = 2


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "examples.stacks.feed.settings")
    import django

    django.setup()
    from django.conf import settings

    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    trusts_its_read = settings.FEED_DEFECT == "delete-lost-to-fanout"
    print(f"fanout worker: polling every {POLL:g} s, {THREADS} threads"
          + (", DEFECT delete-lost-to-fanout" if trusts_its_read else ""), flush=True)
    with ThreadPoolExecutor(THREADS, thread_name_prefix="fanout") as pool:
        while not stopping:
            if not run_batch(pool, trusts_its_read):
                time.sleep(POLL)


def run_batch(pool: ThreadPoolExecutor, trusts_its_read: bool) -> int:
    from django.db import transaction

    from examples.stacks.feed.news.models import Job, Post

    with transaction.atomic():
        jobs = list(Job.objects.select_for_update(skip_locked=True).order_by("id")[:BATCH])
        if not jobs:
            return 0
        # the batch's read: each fan-out's post as it is now (its author, its time, whether deleted)
        posts = Post.objects.in_bulk([j.post_id for j in jobs if j.kind == Job.FANOUT])
        removals = [j for j in jobs if j.kind != Job.FANOUT]
        for done in pool.map(run_job, removals):  # .map re-raises a job's error: the batch rolls back, retried
            pass
        for done in pool.map(lambda j: fan_out(j.post_id, posts.get(j.post_id), trusts_its_read),
                             [j for j in jobs if j.kind == Job.FANOUT]):
            pass
        Job.objects.filter(pk__in=[j.pk for j in jobs]).delete()
    return len(jobs)


def run_job(job: Any) -> None:
    from django.db import connection, transaction

    from examples.stacks.feed.news.models import Job, Post, TimelineEntry

    try:
        with transaction.atomic():
            if job.kind == Job.DELETE:
                # the row lock a fan-out of this post takes too: one waits for the other
                Post.objects.select_for_update().filter(pk=job.post_id).update(deleted=True)
                TimelineEntry.objects.filter(post_id=job.post_id).delete()
            elif job.kind == Job.UNFOLLOW:
                with connection.cursor() as c:
                    # only a follow that started before the unfollow: a re-follow since started it again
                    c.execute("DELETE FROM actstream_follow WHERE user_id = %s AND content_type_id = %s AND "
                              "object_id = %s AND flag = '' AND started <= %s",
                              [job.user_id, user_type(), str(job.other_id), job.at])
                TimelineEntry.objects.filter(owner_id=job.user_id, author_id=job.other_id, ts__lte=job.at).delete()
    finally:
        close_if_broken()


def fan_out(post_id: int, read: Any, trusts_its_read: bool) -> None:
    from django.db import connection, transaction

    from examples.stacks.feed.news.models import Post

    try:
        with transaction.atomic():
            if trusts_its_read:  # THE DEFECT: the batch's read, however old, decides
                post = read
            else:  # the post as it is now, locked: a delete waits, or has already marked it
                post = Post.objects.select_for_update().filter(pk=post_id).first()
            if post is None or post.deleted:
                return
            with connection.cursor() as c:
                c.execute("INSERT INTO news_timelineentry (owner_id, post_id, author_id, ts) "
                          "SELECT f.user_id, %s, %s, %s FROM actstream_follow f WHERE f.content_type_id = %s AND "
                          "f.object_id = %s AND f.flag = '' AND f.started <= %s FOR SHARE "
                          "ON CONFLICT DO NOTHING",
                          [post.pk, post.author_id, post.created_at, user_type(), str(post.author_id),
                           post.created_at])
                c.execute("INSERT INTO news_timelineentry (owner_id, post_id, author_id, ts) VALUES (%s, %s, %s, %s) "
                          "ON CONFLICT DO NOTHING", [post.author_id, post.pk, post.author_id, post.created_at])
    finally:
        close_if_broken()


_USER_TYPE: list[int] = []


def user_type() -> int:
    if not _USER_TYPE:
        from django.contrib.auth import get_user_model
        from django.contrib.contenttypes.models import ContentType

        _USER_TYPE.append(ContentType.objects.get_for_model(get_user_model()).pk)
    return _USER_TYPE[0]


def close_if_broken() -> None:
    """A thread's connection that failed is closed, so its next job connects anew (no request cycle here)."""
    from django.db import connection

    if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
        connection.close()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
