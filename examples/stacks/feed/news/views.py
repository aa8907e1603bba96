"""The feed's HTTP API (its own: not peakproof's contract; ``driver.py`` adapts it).

    POST   /api/users/{u}/following/        {"username": f}        u follows f            201
    DELETE /api/users/{u}/following/{f}/                            u unfollows f          204
    POST   /api/posts/                      {"author", "text"}     publish                201 the post
    DELETE /api/posts/{id}/                                         delete (and its actions) 204
    GET    /api/users/{u}/home/?limit=20&before=CURSOR              the home feed          200
    POST   /api/admin/follows/bulk/         {"pairs": [[u, f]...]} bulk follows (set-up)  200 {"created"}

Users are django.contrib.auth users, created by name on first use. Follows are actstream's
(``actions.follow`` / ``unfollow``); a post sends ``action.send(author, verb="posted",
action_object=post)``; the home feed is ``actstream.models.user_stream(user)``: a pull
design (merged on read, no inboxes). Errors are ``{"error": code, "detail": text}``; times are
Django's JSON (``DjangoJSONEncoder``: ISO 8601, cut to milliseconds, ``Z``).

Pagination (``settings.FEED_PAGINATION``):

* ``keyset`` (correct): ``next_cursor`` is a signed opaque string holding the (timestamp in
  microseconds, post id) of the page's last item; the next page is the items strictly below
  it in the stream's order (timestamp, then post id, descending).
* ``page-numbers`` (the defect): ``Paginator(user_stream(user), limit)`` and ``?page=N``;
  ``next_cursor`` is the integer N + 1. A delete between two page reads shifts every later
  item up by one (the next page skips one), a publish shifts them down (it repeats one).

Design (``settings.FEED_DESIGN``): ``pull`` as above, or ``fanout-worker``: fan-out on write by a worker
process, its web side in ``timelines.py`` (the same API; deletes and unfollows applied by the worker).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone as dt_timezone
from typing import Any

from actstream import actions
from actstream.models import Action, Follow, user_stream
from actstream.signals import action
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core import signing
from django.core.paginator import EmptyPage, InvalidPage, Paginator
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods

from . import timelines
from .models import Post

User = get_user_model()
MAX_NAME = User._meta.get_field("username").max_length  # 150
MAX_TEXT = 5_000
PAGE, MAX_PAGE = 20, 100
CURSOR_SALT = "news.home.cursor"
EPOCH = datetime(1970, 1, 1, tzinfo=dt_timezone.utc)
UNUSABLE = "!"  # no password: these users never log in here
CHUNK = 5_000   # names or rows per statement (PostgreSQL takes at most 65,535 parameters)


class ApiError(Exception):
    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


def api(*methods: str):
    """A JSON view: the methods it takes; an ApiError becomes {"error", "detail"} with its status."""
    def wrap(view):
        @require_http_methods(list(methods))
        def handler(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except ApiError as e:
                return JsonResponse({"error": e.code, "detail": e.detail}, status=e.status)
        handler.__name__ = view.__name__
        return handler
    return wrap


def invalid(detail: str) -> ApiError:
    return ApiError(400, "invalid", detail)


def body(request: HttpRequest, *fields: str) -> dict:
    try:
        doc = json.loads(request.body or b"null")
    except ValueError as e:
        raise invalid(f"the body must be a JSON object: {e}") from None
    if not isinstance(doc, dict):
        raise invalid("the body must be a JSON object")
    missing = [f for f in fields if f not in doc]
    if missing:
        raise invalid(f"missing field(s): {', '.join(missing)}")
    return doc


def valid_name(value: Any, what: str = "username") -> str:
    if type(value) is not str or not 0 < len(value) <= MAX_NAME:
        raise invalid(f"{what} must be a string of 1 to {MAX_NAME} characters; got {value!r:.60}")
    return value


def user_named(name: str) -> Any:
    """The user of that name, created on first use (two workers racing: get_or_create retries the read)."""
    return User.objects.get_or_create(username=name, defaults={"password": UNUSABLE})[0]


def post_json(post: Post, author: str) -> dict:
    return {"id": post.pk, "author": author, "text": post.text, "created_at": post.created_at}


# -- the graph -------------------------------------------------------------------------------------------

@api("GET")
def health(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True, "pagination": settings.FEED_PAGINATION, "design": settings.FEED_DESIGN})


@api("POST")
def follow(request: HttpRequest, username: str) -> HttpResponse:
    who = valid_name(username)
    target = valid_name(body(request, "username")["username"], "the followed username")
    if who == target:
        raise invalid(f"a user cannot follow themselves ({who!r})")
    if settings.FEED_DESIGN == "fanout-worker":
        timelines.follow(user_named(who), user_named(target))
    else:
        actions.follow(user_named(who), user_named(target), send_action=False)  # idempotent (get_or_create)
    return JsonResponse({"user": who, "following": target}, status=201)


@api("DELETE")
def unfollow(request: HttpRequest, username: str, followee: str) -> HttpResponse:
    user = User.objects.filter(username=username).first()
    target = User.objects.filter(username=followee).first()
    if user is not None and target is not None and settings.FEED_DESIGN == "fanout-worker":
        timelines.unfollow(user, target)  # the worker applies it
    elif user is not None and target is not None:
        actions.unfollow(user, target)  # idempotent: deletes the Follow rows, if any
    return HttpResponse(status=204)


@api("POST")
def bulk_follow(request: HttpRequest) -> HttpResponse:
    """Set-up: many follows in one request (users created as needed); how many were new."""
    pairs = body(request, "pairs")["pairs"]
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise invalid("pairs must be a list of [user, followee] pairs")
    for u, f in pairs:
        valid_name(u, "user")
        valid_name(f, "followee")
        if u == f:
            raise invalid(f"a user cannot follow themselves ({u!r})")
    with transaction.atomic():
        ids = users_by_name({n for p in pairs for n in p})
        ct = ContentType.objects.get_for_model(User)
        wanted = {(ids[u], str(ids[f])) for u, f in pairs}
        followers = sorted({uid for uid, _ in wanted})
        have: set[tuple[int, str]] = set()
        for i in range(0, len(followers), CHUNK):
            have.update(Follow.objects.filter(user_id__in=followers[i:i + CHUNK], content_type=ct, flag="")
                        .values_list("user_id", "object_id"))
        new = sorted(wanted - have)
        Follow.objects.bulk_create([Follow(user_id=uid, content_type=ct, object_id=oid, actor_only=True, flag="")
                                    for uid, oid in new], batch_size=CHUNK, ignore_conflicts=True)
    return JsonResponse({"created": len(new)})


def users_by_name(names: set[str]) -> dict[str, int]:
    names_list = sorted(names)
    found: dict[str, int] = {}
    for i in range(0, len(names_list), CHUNK):
        found.update(User.objects.filter(username__in=names_list[i:i + CHUNK]).values_list("username", "id"))
    missing = [n for n in names_list if n not in found]
    if missing:
        User.objects.bulk_create([User(username=n, password=UNUSABLE) for n in missing], batch_size=CHUNK,
                                 ignore_conflicts=True)  # another request may create some at once
        for i in range(0, len(missing), CHUNK):
            found.update(User.objects.filter(username__in=missing[i:i + CHUNK]).values_list("username", "id"))
    return found


# -- posts -----------------------------------------------------------------------------------------------

@api("POST")
def create_post(request: HttpRequest) -> HttpResponse:
    doc = body(request, "author", "text")
    author = valid_name(doc["author"], "author")
    text = doc["text"]
    if type(text) is not str or len(text) > MAX_TEXT:
        raise invalid(f"text must be a string of at most {MAX_TEXT:,} characters")
    if settings.FEED_DESIGN == "fanout-worker":
        return JsonResponse(post_json(timelines.publish(user_named(author), text), author), status=201)
    with transaction.atomic():
        user = user_named(author)
        post = Post.objects.create(author=user, text=text)
        # the action carries the post's own time: the stream orders by it
        action.send(user, verb="posted", action_object=post, timestamp=post.created_at)
    return JsonResponse(post_json(post, author), status=201)


@api("DELETE")
def delete_post(request: HttpRequest, post_id: str) -> HttpResponse:
    if not post_id.isdigit():
        raise ApiError(404, "not_found", f"no post {post_id!r}")
    if settings.FEED_DESIGN == "fanout-worker":
        if not timelines.delete(int(post_id)):  # the worker applies it
            raise ApiError(404, "not_found", f"no post {post_id!r}")
        return HttpResponse(status=204)
    with transaction.atomic():
        post = Post.objects.select_for_update().filter(pk=int(post_id)).first()
        if post is None:
            raise ApiError(404, "not_found", f"no post {post_id!r}")
        Action.objects.filter(action_object_content_type=ContentType.objects.get_for_model(Post),
                              action_object_object_id=str(post.pk)).delete()
        post.delete()
    return HttpResponse(status=204)


# -- the home feed ---------------------------------------------------------------------------------------

@api("GET")
def home(request: HttpRequest, username: str) -> HttpResponse:
    raw = request.GET.get("limit", str(PAGE))
    limit = int(raw) if raw.isdigit() else 0
    if not 1 <= limit <= MAX_PAGE:
        raise invalid(f"limit must be an integer from 1 to {MAX_PAGE}; got {raw[:20]!r}")
    user = User.objects.filter(username=username).first()
    if user is None:  # nobody of that name yet: follows nobody
        return JsonResponse({"results": [], "next_cursor": None})
    if settings.FEED_DESIGN == "fanout-worker":
        return timelines.home(user, limit, request.GET.get("before"), EPOCH)
    stream = user_stream(user, verb="posted")
    if settings.FEED_PAGINATION == "page-numbers":
        return page_numbers(request, stream, limit)
    before = request.GET.get("before")
    stream = stream.order_by("-timestamp", "-action_object_object_id")
    if before:
        ts, post_id = decode_cursor(before)
        stream = stream.filter(Q(timestamp__lt=ts) | Q(timestamp=ts, action_object_object_id__lt=post_id))
    rows = list(stream[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = encode_cursor(rows[-1]) if more and rows else None
    return JsonResponse({"results": items(rows), "next_cursor": nxt})


def page_numbers(request: HttpRequest, stream: Any, limit: int) -> HttpResponse:
    """THE DEFECT (FEED_PAGINATION=page-numbers): offsets into a stream that changes between reads."""
    paginator = Paginator(stream, limit)
    try:
        page = paginator.page(request.GET.get("page", 1))
    except EmptyPage:
        return JsonResponse({"results": [], "next_cursor": None})
    except InvalidPage as e:
        raise invalid(f"page: {e}") from None
    nxt = page.next_page_number() if page.has_next() else None
    return JsonResponse({"results": items(list(page.object_list)), "next_cursor": nxt})


def items(rows: list[Action]) -> list[dict]:
    out = []
    for a in rows:
        post, actor = a.action_object, a.actor  # fetched in bulk by actstream (fetch_generic_relations)
        if post is None or actor is None:  # deleted between the stream's query and the fetch
            continue
        out.append({"id": a.pk, "verb": a.verb, "actor": actor.username, "timestamp": a.timestamp,
                    "post": post_json(post, actor.username)})
    return out


def encode_cursor(a: Action) -> str:
    us = (a.timestamp - EPOCH) // timedelta(microseconds=1)  # exact: no float
    return signing.dumps([us, a.action_object_object_id], salt=CURSOR_SALT, compress=True)


def decode_cursor(token: str) -> tuple[datetime, str]:
    try:
        us, post_id = signing.loads(token, salt=CURSOR_SALT)
        if type(us) is int and type(post_id) is str:
            return EPOCH + timedelta(microseconds=us), post_id
    except (signing.BadSignature, ValueError, TypeError):
        pass
    raise invalid(f"before must be a next_cursor this service returned; got {token[:80]!r}")
