"""The feed reference target over real HTTP: contract, restart, shard down, backpressure,
and the URL property machine catching a broken served feed."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests
from hypothesis.stateful import run_state_machine_as_test

from peakproof.cases import get_case
from peakproof.cases.feed import HttpFeed, check_feed
from peakproof.checks import assert_checks
from peakproof.launch import ServedTarget

from peakproof.pytest_plugin import Target
from peakproof.cases.feed.properties import FeedMachine

from tests.support.broken_feeds import serve_core
from tests.support.search import failure_text, fixed_budget



@pytest.fixture(scope="module")
def feed() -> Iterator[ServedTarget]:
    with ServedTarget(get_case("feed"), threshold=3) as t:
        yield t


def test_the_contract_round_trip_pages_newest_first_with_a_cursor(feed: ServedTarget) -> None:
    d = HttpFeed(feed.url)
    for f in ("c1-a", "c1-b"):
        assert d.follow("c1-reader", f).type == "ok"
    ids = [d.publish("c1-a" if i % 2 else "c1-b", f"post {i}").value["post_id"] for i in range(45)]
    d.fanout()
    first = d.read("c1-reader", 20)
    assert [i["post_id"] for i in first.value["items"]] == ids[::-1][:20]
    second = d.read("c1-reader", 20, first.value["next_cursor"])
    third = d.read("c1-reader", 20, second.value["next_cursor"])
    shown = [i["post_id"] for op in (first, second, third) for i in op.value["items"]]
    assert shown == ids[::-1] and third.value["next_cursor"] is None
    assert_checks(check_feed(d.history), decided=("feed_is_newest_first", "no_duplicate_items",
                                                  "pages_do_not_skip_or_repeat", "feed_matches_pull_model"))


def test_bad_input_gets_a_clear_error_and_changes_nothing(feed: ServedTarget) -> None:
    base = feed.url
    cases = [("POST", "/posts", b"not json", 400, "JSON object"),
             ("POST", "/posts", b'{"author_id": "x"}', 400, "text"),
             ("POST", "/posts", b'{"author_id": 7, "text": "t"}', 400, "author_id"),
             ("GET", "/users/u/feed?limit=0", None, 400, "limit"),
             ("GET", "/users/u/feed?limit=abc", None, 400, "limit"),
             ("GET", "/users/u/feed?cursor=nonsense", None, 400, "cursor"),
             ("PUT", "/users/u/following/u", None, 409, "themselves"),
             ("GET", "/users/u/feed?cursor=", None, 400, "cursor"),
             ("DELETE", "/users/u/following/" + "f" * 201, None, 400, "followee_id"),
             ("DELETE", "/posts/no-such-post", None, 404, "no post"),
             ("PATCH", "/posts", None, 405, "POST"),
             ("POST", "/admin/graph", b'{"follows": [["a"]]}', 400, "pairs")]
    before = requests.get(base + "/_stats", timeout=5).json()
    for method, path, body, status, words in cases:
        r = requests.request(method, base + path, data=body, timeout=5)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        assert words in r.json()["message"], (path, r.json())
    after = requests.get(base + "/_stats", timeout=5).json()
    assert after["posts"] == before["posts"]


def test_a_restarted_target_loses_no_published_post(tmp_path: Path) -> None:
    """SIGKILL mid-stream: every acknowledged post, follow and delete is there after the restart."""
    with ServedTarget(get_case("feed"), db=tmp_path / "feed.sqlite3", threshold=2) as t:
        d = HttpFeed(t.url)
        d.add_follows([(f"r{i}", "star") for i in range(5)] + [("r0", f"w{j}") for j in range(3)])
        acked = []
        for i in range(120):
            op = d.publish("star" if i % 3 == 0 else f"w{i % 3}", f"#{i}")
            assert op.type == "ok"
            acked.append(op.value["post_id"])
        d.delete(acked[5])
        d.unfollow("r0", "w2")
        before = d.read("r0", 100).value["items"]
        t.restart(kill=True)
        d2 = HttpFeed(t.url)
        after = d2.read("r0", 100).value["items"]
        assert after == before
        # every acknowledged post is back: star's via r1 (star is above the threshold: merged at read time)
        star_posts = {p for i, p in enumerate(acked) if i % 3 == 0 and p != acked[5]}
        page, shown = d2.read("r1", 100), set()
        while True:
            shown |= {i["post_id"] for i in page.value["items"]}
            if not page.value["next_cursor"]:
                break
            page = d2.read("r1", 100, page.value["next_cursor"])
        assert shown == star_posts
        fresh = d2.publish("w0", "after the restart").value["post_id"]
        assert fresh not in acked  # ids keep counting after a restart


def test_a_shard_down_degrades_its_users_to_fan_in_not_to_an_empty_feed(feed: ServedTarget) -> None:
    d = HttpFeed(feed.url)
    users = [f"sd-u{i}" for i in range(8)]
    d.add_follows([(u, a) for u in users for a in ("sd-a", "sd-b", "sd-c")])
    for i in range(30):
        d.publish(("sd-a", "sd-b", "sd-c")[i % 3], f"#{i}")
    d.fanout()
    healthy = {u: d.read(u).value["items"] for u in users}
    stats = d.admin(shards_down=[0, 1])
    assert stats is not None and stats["down"] == [0, 1]
    try:
        degraded = {u: d.read(u, process="degraded") for u in users}
        assert any(op.value["degraded"] for op in degraded.values())  # some users live on shards 0-1
        for u, op in degraded.items():
            assert op.value["items"] and op.value["items"] == healthy[u], u
        d.unfollow(users[0], "sd-a")
        assert all(i["author_id"] != "sd-a" for i in d.read(users[0]).value["items"])
    finally:
        d.admin(shards_down=[])
    assert_checks(check_feed(d.history, window=float("inf")),
                  decided=("feed_matches_pull_model", "unfollowed_authors_never_shown", "feed_is_newest_first"))


def test_a_full_fan_out_queue_refuses_with_retry_after_and_a_slow_one_flags_publishes(tmp_path: Path) -> None:
    with ServedTarget(get_case("feed"), threshold=1000, fanout_rate=50, max_backlog=120) as t:
        d = HttpFeed(t.url)
        d.add_follows([(f"f{i}", "loud") for i in range(100)])
        first = requests.post(t.url + "/posts", json={"author_id": "loud", "text": "1"}, timeout=5)
        assert first.status_code == 201
        second = requests.post(t.url + "/posts", json={"author_id": "loud", "text": "2"}, timeout=5)
        assert second.status_code == 429 and int(second.headers["Retry-After"]) >= 1, second.text
        assert "publish again" in second.json()["message"]
        # at 50 writes/s the 100-write backlog takes ~2 s: over a 1 s window, a publish is flagged
        d.admin(max_backlog=None)
        t2 = requests.post(t.url + "/posts", json={"author_id": "loud", "text": "3"}, timeout=5)
        assert t2.status_code == 201 and t2.json()["fanout"]["within_window"] is True  # 60 s window: fine
    with ServedTarget(get_case("feed"), threshold=1000, fanout_rate=50, window=1) as t:
        d = HttpFeed(t.url)
        d.add_follows([(f"f{i}", "loud") for i in range(100)])
        requests.post(t.url + "/posts", json={"author_id": "loud", "text": "1"}, timeout=5)
        slow = requests.post(t.url + "/posts", json={"author_id": "loud", "text": "2"}, timeout=5)
        assert slow.status_code == 201 and slow.json()["fanout"]["within_window"] is False
        assert slow.headers["Feed-Backpressure"].startswith("lag=")


# -- the URL machine catches a broken served feed ------------------------------------------------


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def test_the_url_machine_catches_a_served_feed_that_ignores_deletes() -> None:
    from peakproof.targets.feed import FeedCore

    class IgnoresDeletes(FeedCore):
        def delete(self, post_id: str) -> Any:
            return self.posts[post_id] if post_id in self.posts else super().delete(post_id)

    url, server = serve_core(IgnoresDeletes(time.time, threshold=1))
    try:
        class Machine(FeedMachine):
            target = Target("feed", url)

        with pytest.raises((AssertionError, BaseExceptionGroup)) as caught:
            run_state_machine_as_test(Machine, settings=fixed_budget(200, stateful_step_count=20, shrink=False))
        # the invariant's AssertionError (Hypothesis re-raises it; one in its group if it found several
        # distinct failures) carries assert_checks' summary, one "name: FAIL (counts)" line per broken check
        holders = [e for e in _leaves(caught.value) if isinstance(e, AssertionError)
                   and re.search(r"^deleted_posts_never_shown: FAIL \(", str(e), re.MULTILINE)]
        assert holders, failure_text(caught.value)
    finally:
        server.should_exit = True
