"""The fanout-worker design's web side (``FEED_DESIGN=fanout-worker``): fan-out on write, by a worker.

A publish stores the post and a ``fanout`` job; a delete and an unfollow answer 204 at once and leave a job;
the worker (``examples/stacks/feed/fanout_worker.py``, a process of its own) applies them: it writes a
``TimelineEntry`` for each follower of the author **and for the author** (own posts are in the home timeline),
takes a deleted post's entries out of every timeline, and deletes an unfollowed follow with that author's
entries in the follower's timeline. The home timeline reads the entries alone (keyset, newest first by
(timestamp, post id)); it never filters by the post's ``deleted`` flag: until the worker ran, a deleted post
still shows. A follow brings nothing: the worker writes a post only to followers whose follow started before
it was published.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from actstream.models import Follow
from django.contrib.contenttypes.models import ContentType
from django.core import signing
from django.db import transaction
from django.db.models import Q
from django.http import HttpResponse, JsonResponse
from django.utils import timezone

from .models import Job, Post, TimelineEntry

CURSOR_SALT = "news.timeline.cursor"


def follow(user: Any, target: Any) -> None:
    """A follow, at once. Over an unfollow the worker has not yet applied, the follow starts again now: the worker
    deletes only a follow that started before the unfollow (``Job.at``), so the unfollow's removal still happens
    and the follow outlives it, bringing nothing of before."""
    ct = ContentType.objects.get_for_model(type(user))
    with transaction.atomic():
        pending = Job.objects.filter(kind=Job.UNFOLLOW, user=user, other=target).exists()
        row, created = Follow.objects.get_or_create(user=user, content_type=ct, object_id=str(target.pk), flag="",
                                                    defaults={"actor_only": True})
        # 0 rows: the worker deleted it meanwhile (its transaction held the row): follow anew
        if not created and pending and not Follow.objects.filter(pk=row.pk).update(started=timezone.now()):
            Follow.objects.create(user=user, content_type=ct, object_id=str(target.pk), flag="", actor_only=True)


def unfollow(user: Any, target: Any) -> None:
    """Left to the worker (204 at once); nothing to do for a follow that is not there, or for oneself."""
    ct = ContentType.objects.get_for_model(type(user))
    if user.pk != target.pk and Follow.objects.filter(user=user, content_type=ct, object_id=str(target.pk),
                                                      flag="").exists():
        Job.objects.create(kind=Job.UNFOLLOW, user=user, other=target)


def publish(user: Any, text: str) -> Post:
    with transaction.atomic():
        post = Post.objects.create(author=user, text=text)
        Job.objects.create(kind=Job.FANOUT, post=post)
    return post


def delete(post_id: int) -> bool:
    """A delete the worker applies (204 at once); False for a post that is not there (or already taken out)."""
    with transaction.atomic():
        if not Post.objects.filter(pk=post_id, deleted=False).exists():
            return False
        Job.objects.create(kind=Job.DELETE, post_id=post_id)
    return True


def home(user: Any, limit: int, before: str | None, epoch: datetime) -> HttpResponse:
    """The reader's timeline entries, newest first by (timestamp, post id): no filter on ``Post.deleted``, the
    entries are the timeline (the worker's lag is what a reader sees)."""
    entries = TimelineEntry.objects.filter(owner=user).select_related("post", "author").order_by("-ts", "-post_id")
    if before:
        ts, post_id = decode_cursor(before, epoch)
        entries = entries.filter(Q(ts__lt=ts) | Q(ts=ts, post_id__lt=post_id))
    rows = list(entries[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = None
    if more and rows:
        last = rows[-1]
        nxt = signing.dumps([(last.ts - epoch) // timedelta(microseconds=1), last.post_id], salt=CURSOR_SALT,
                             compress=True)
    return JsonResponse({"results": [{"id": e.pk, "verb": "posted", "actor": e.author.username, "timestamp": e.ts,
                                      "post": {"id": e.post_id, "author": e.author.username, "text": e.post.text,
                                               "created_at": e.post.created_at}} for e in rows],
                         "next_cursor": nxt})


def decode_cursor(token: str, epoch: datetime) -> tuple[datetime, int]:
    from .views import invalid

    try:
        us, post_id = signing.loads(token, salt=CURSOR_SALT)
        if type(us) is int and type(post_id) is int:
            return epoch + timedelta(microseconds=us), post_id
    except (signing.BadSignature, ValueError, TypeError):
        pass
    raise invalid(f"before must be a next_cursor this service returned; got {token[:80]!r}")
