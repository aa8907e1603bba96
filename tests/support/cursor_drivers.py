"""Drivers for the example feed (``examples/feed/``) that hand the harness what real services hand it:
page cursors of every JSON type, the same cursor value for every reader's second page, times cut to
milliseconds. The service under them is correct, so any FAIL or harness error is the harness's."""

from __future__ import annotations

import math
import threading
from typing import Any

from pathlib import Path

from peakproof.cases.feed import FeedDriver
from peakproof.driver import driver_class
from peakproof.history import OK, Op

# by its file, as a user's driver is loaded (the examples are no package of the harness)
Chirp = driver_class(f"{Path(__file__).resolve().parents[2] / 'examples' / 'feed' / 'driver.py'}:Chirp", FeedDriver)

_lock = threading.Lock()
_real: dict[tuple[str, str, int], Any] = {}  # (reader, process, page number) -> the service's own cursor


def _cut(t: Any) -> Any:
    return math.floor(float(t) * 1000) / 1000 if isinstance(t, (int, float)) else t


class PageNumbers(Chirp):
    """Cursors as a page-numbered API hands them out: the second page's is the integer 2 for every reader,
    the third's a dict ``{"page": 3}``, later ones the string of the number; times cut to milliseconds (as
    Django's JSON does). The service's own cursor is kept per reader and process, as a session would."""

    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: Any = None) -> Op:
        n = 1 if cursor is None else int(cursor["page"] if isinstance(cursor, dict) else cursor)
        with _lock:
            real = None if cursor is None else _real.get((user, repr(process), n))
        op = super().read(user, limit, real, process=process, intended_time=intended_time)
        op.args["cursor"] = cursor  # recorded as the harness passed it
        if op.type == OK:
            for item in op.value["items"]:
                item["created_at"] = _cut(item["created_at"])
            nxt = op.value.get("next_cursor")
            if nxt is not None:
                with _lock:
                    _real[(user, repr(process), n + 1)] = nxt
                op.value["next_cursor"] = n + 1 if n + 1 == 2 else {"page": n + 1} if n + 1 == 3 else str(n + 1)
        return op

    def publish(self, author: str, text: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        op = super().publish(author, text, process=process, intended_time=intended_time)
        if op.type == OK:
            op.value["created_at"] = _cut(op.value["created_at"])
        return op


class OffsetPages(Chirp):
    """The offset pager's defect, over the correct example feed: page n is items (n-1)*limit .. n*limit of the
    timeline as it stands when page n is read (Django's ``Paginator`` with ``?page=n``). A post deleted from an
    earlier page makes the next page skip one; a post published in between makes it repeat one."""

    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: Any = None) -> Op:
        n = 1 if cursor is None else int(cursor)
        op = super().read(user, limit * n + 1, None, process=process, intended_time=intended_time)
        op.args.update(limit=limit, cursor=cursor)  # recorded as the harness asked
        if op.type == OK:
            items = op.value["items"]
            op.value["items"] = items[(n - 1) * limit:n * limit]
            op.value["next_cursor"] = n + 1 if len(items) > n * limit else None
        return op
