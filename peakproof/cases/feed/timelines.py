"""The feed's timeline promises: newest first, deleted and unfollowed never shown, no duplicates,
pages that neither skip nor repeat, the pull model, the inbox cap, visibility within the window."""

from __future__ import annotations

from typing import Any

from peakproof.checks import CheckResult, Due, Violations
from peakproof.history import Op
from peakproof.timefmt import moment
from .analysis import FEED, FeedAnalysis, _items, _multi_item_reads


@FEED.register
def feed_is_newest_first(a: FeedAnalysis) -> CheckResult:
    """Every page lists its posts newest first (created_at descending, ties by post id, or in any
    order where the target's stated rules leave them unordered: ``--time-precision``, ``--ties any``)."""
    v = Violations()
    tie_rule = "ties by post id" if a.rules.ties_known else (
        f"posts of one {a.rules.time_precision:g} s step in any order" if a.rules.time_precision
        else "ties in any order")
    for op in a.reads:
        keys = [a.key(i) for i in _items(op)]
        for x, y in zip(keys, keys[1:]):
            if not (x > y or (a.unordered(x, y) and x != y)):
                v.add(f"{op.args['user_id']!r}'s feed put post {y[1]} (t={y[0]:.3f}) after {x[1]} (t={x[0]:.3f}): "
                      f"not newest first ({tie_rule})", op)
                break
    return v.result("feed_is_newest_first", {"reads": len(a.reads)}, chances=_multi_item_reads(a),
                    chance_kind="pages of two posts or more")


@FEED.register
def deleted_posts_never_shown(a: FeedAnalysis) -> CheckResult:
    """A post whose delete returned never shows in a read invoked after that."""
    v = Violations()
    chances = 0
    longest = 0.0  # s after its delete returned that a deleted post was still shown: a worker's lag, or lost
    for op in a.reads:
        # a chance: a read after some followed author's post was deleted
        chances += any(a._first_delete_by_author.get(author, op.invoke_seq) < op.invoke_seq
                       for author in a.followed_ever(op))
        for item in _items(op):
            pid = str(item["post_id"])
            if a.deleted_before(op, pid):
                after = max(0.0, op.invoke_time - a._deleted_at[pid])
                longest = max(longest, after)
                v.add(f"{op.args['user_id']!r}'s feed shows post {item['post_id']} {after:.2f} s after its delete "
                      f"returned", op)
                break
    # how long says which it is: a design's worker lag (up to its period) or a delete lost (as long as the run looked)
    counts: dict[str, object] = {"reads": len(a.reads)}
    if v.count:
        counts["longest_shown_after_delete_s"] = round(longest, 2)
    return v.result("deleted_posts_never_shown", counts, chances=chances,
                    chance_kind="reads after a followed author's post was deleted")


@FEED.register
def unfollowed_authors_never_shown(a: FeedAnalysis) -> CheckResult:
    """After an unfollow returns, the reader's feed shows none of that author's posts (until a refollow)."""
    v = Violations()
    chances = 0
    for op in a.reads:
        # a chance: a read while an author with posts is certainly unfollowed by this reader
        user = op.args["user_id"]
        chances += any(a.unfollowed_before(op, author) and a.posts_before(author, op.invoke_seq)
                       for author in a._unfollow_pairs_by_user.get(user, ()))
        for item in _items(op):
            if a.unfollowed_before(op, str(item["author_id"])):
                v.add(f"{op.args['user_id']!r}'s feed shows {item['author_id']!r}'s post {item['post_id']} after the "
                      f"unfollow returned", op)
                break
    return v.result("unfollowed_authors_never_shown", {"reads": len(a.reads)}, chances=chances,
                    chance_kind="reads while an author with posts was unfollowed")


@FEED.register
def no_duplicate_items(a: FeedAnalysis) -> CheckResult:
    """No page shows one post twice."""
    v = Violations()
    for op in a.reads:
        ids = [i["post_id"] for i in _items(op)]
        if len(ids) != len(set(ids)):
            v.add(f"{op.args['user_id']!r}'s page shows a post twice: "
                  f"{sorted({i for i in ids if ids.count(i) > 1})}", op)
    return v.result("no_duplicate_items", {"reads": len(a.reads)}, chances=_multi_item_reads(a),
                    chance_kind="pages of two posts or more")


@FEED.register
def pages_do_not_skip_or_repeat(a: FeedAnalysis) -> CheckResult:
    """Following next_cursor never shows a post twice, never goes back in time, and never
    skips a post that was certainly visible.

    A skip: the next page leaves out a live post of a followed author that lies between
    the previous page's last post and this page's last one (or anywhere after the cursor,
    on a short page), though that post was certainly visible: this user had been shown
    it already, or it was published a whole window before, or the target reports its
    fan-out settled. Judged on quiet pages only (no write overlapped them), within the
    posts the inbox cap guarantees.
    """
    v = Violations()
    chains = 0
    for op in a.reads:
        prev = a.prev_page.get(id(op))  # the page this reader got the cursor from (FeedAnalysis.prev_page)
        if prev is not None:
            chains += 1
            _judge_page_turn(a, v, prev, op, op.args.get("cursor"))
    return v.result("pages_do_not_skip_or_repeat", {"page_chains": chains}, chances=chains,
                    chance_kind="page turns (a read with the cursor a recorded page returned)")


@FEED.register
def feed_matches_pull_model(a: FeedAnalysis) -> CheckResult:
    """A quiet read returns the pull model's timeline in its order; a settled one returns all
    of it that the inbox cap guarantees, and beyond the cap a part of it in its order (an
    inbox keeps its newest ``inbox_cap`` entries while a pulled author's posts all stay)."""
    v = Violations()
    judged = 0
    for op in a.reads:
        got = [a.key(i) for i in _items(op)]
        model = a.model(op, upto=min(got) if got else None) if a.quiet(op) else None
        if model is None:
            continue
        judged += 1
        live, guaranteed = model
        maybe = a.maybe_shown(op)
        if maybe:  # the stated design leaves them either way: judged on the rest
            got = [k for k in got if k not in maybe]
        limit = int(op.args.get("limit") or 20)
        shown, vouched = len(got), min(limit, guaranteed)  # a settled page holds this many, whatever their order
        if not a.rules.ties_known:  # posts of one step in the target's own order: compare in ours, the edges' aside
            got, live, guaranteed = _comparable(a, op, got, live, guaranteed)
        settled = op.value.get("backlog") == 0
        within = min(len(got), guaranteed)  # beyond the cap: a subsequence (evicted inbox posts), in order
        if settled and (got[:within] != live[:within] or not _in_order_within(got[within:], live[within:])):
            first = next(i for i, (x, y) in enumerate(zip(got + [None] * len(live), live + [None] * len(got)))
                         if x != y)
            v.add(f"{op.args['user_id']!r}'s settled feed differs from the pull model at position {first}: got "
                  f"{got[first][1] if first < len(got) else 'nothing'}, the model has "
                  f"{live[first][1] if first < len(live) else 'nothing'}", op)
        elif not settled and not _in_order_within(got, live):
            # fan-out may still be on its way: newer posts can be missing, nothing else may differ
            v.add(f"{op.args['user_id']!r}'s feed shows posts the pull model does not have, or out of its order: "
                  f"{[k[1] for k in got][:6]}", op)
        elif settled and shown < vouched:
            missing = live[min(len(got), len(live) - 1)] if live else ("", "?")
            v.add(f"{op.args['user_id']!r}'s settled feed stops after {shown} posts; the model has "
                  f"{vouched} within the inbox cap (first missing {missing[1]})", op)
    return v.result("feed_matches_pull_model", {"quiet_reads": judged}, chances=judged,
                    chance_kind="quiet reads (no write overlapped them)")


@FEED.register
def inbox_capped(a: FeedAnalysis) -> CheckResult:
    """No inbox holds more than the cap (the target's own ``inbox_size``, where it reports one)."""
    sizes = [op.value["inbox_size"] for op in a.reads if isinstance(op.value.get("inbox_size"), int)]
    if not sizes:
        return CheckResult("inbox_capped", "unknown", {"reads_with_size": 0},
                           note="the target does not report inbox_size (optional in the contract): the cap "
                                "cannot be observed", chances=0, chance_kind="reads of users whose followed "
                                                                              "authors published more than the cap")
    v = Violations()
    chances = 0
    for op in a.reads:
        size = op.value.get("inbox_size")
        if not isinstance(size, int):
            continue
        # a chance: the reader's followed authors had published more posts than the cap
        chances += sum(a.posts_before(author, op.invoke_seq) for author in a.followed_ever(op)) > a.inbox_cap
        if size > a.inbox_cap:
            v.add(f"{op.args['user_id']!r}'s inbox holds {size} entries (cap {a.inbox_cap})", op)
    return v.result("inbox_capped", {"largest_inbox": max(sizes)}, chances=chances,
                    chance_kind="reads of users whose followed authors published more than the cap")


@FEED.register
def posts_visible_within_window(a: FeedAnalysis) -> CheckResult:
    """G2: a followed author's post published ``window`` s before a first-page read is in it
    (unless the page is full of newer posts)."""
    v = Violations()
    chances = 0
    due: dict[tuple[str, str], Due] = {}  # (reader, post): judged by the reader's first first page after it fell due
    for op in a.reads:
        if op.args.get("cursor"):
            continue
        live, _ = a.model(op)  # type: ignore[misc]  # a first page always has a model
        limit = int(op.args.get("limit") or 20)
        got = [a.key(i) for i in _items(op)]
        shown = set(got)
        # a chance: a first page whose model holds a post older than the window
        chances += any(op.invoke_time - a.published_at.get(k[1], op.invoke_time) >= a.window for k in live[:limit])
        missing = False
        for key in live[:limit]:
            published = a.published_at.get(key[1], op.invoke_time)
            age = op.invoke_time - published
            if age < a.window:
                continue
            first = (op.args["user_id"], key[1]) not in due
            what = f"post {key[1]} in {op.args['user_id']!r}'s first page"
            if key in shown or a._delete_sent.get(key[1], op.complete_seq) < op.complete_seq:
                if first:  # shown, or a delete sent before the read returned may have taken it
                    due[(op.args["user_id"], key[1])] = Due(what, published + a.window, "held",
                                                            f"shown {age - a.window:.1f} s after")
                continue
            if not (len(got) >= limit and (got[-1] > key or a.unordered(got[-1], key))):
                if first:
                    due[(op.args["user_id"], key[1])] = Due(what, published + a.window, "violated",
                                                            f"absent from a first page read {age - a.window:.1f} s after")
                if not missing:
                    v.add(f"{op.args['user_id']!r}'s feed lacks post {key[1]} published {age:.1f} s before the read "
                          f"(window {a.window:g} s), due at {moment(published + a.window)}", op)
                missing = True
    return v.result("posts_visible_within_window", {"reads": len(a.reads)}, chances=chances,
                    chance_kind="first pages due to show a post older than the window", due=list(due.values()))


def _in_order_within(got: list[tuple[float, str]], live: list[tuple[float, str]]) -> bool:
    it = iter(live)
    return all(any(k == m for m in it) for k in got)  # a subsequence, in the model's order


def _comparable(a: FeedAnalysis, op: Op, got: list[tuple[float, str]], live: list[tuple[float, str]],
                guaranteed: int) -> tuple[list[tuple[float, str]], list[tuple[float, str]], int]:
    """A page and its model where posts of one step are in no known order: both in the model's order,
    without the steps a page's edges cut through (the cursor's step, and a full page's last step), whose
    posts may lie on either side of the edge by the target's finer clock."""
    limit = int(op.args.get("limit") or 20)
    edges = set()
    if got and len(got) >= limit:
        edges.add(got[-1][0])
    bound = a.bound(op)
    if op.args.get("cursor") is not None and bound is not None:
        edges.add(bound[0])
    kept = [k for k in live[:guaranteed] if k[0] not in edges]
    rest = [k for k in live[guaranteed:] if k[0] not in edges]
    return sorted((k for k in got if k[0] not in edges), reverse=True), kept + rest, len(kept)


def _judge_page_turn(a: FeedAnalysis, v: Violations, prev: Op, op: Op, cursor: Any) -> None:
    user = op.args["user_id"]
    before = {i["post_id"] for i in _items(prev)}
    edge = a.key(_items(prev)[-1]) if _items(prev) else None
    for item in _items(op):
        key = a.key(item)
        if item["post_id"] in before or (edge is not None and not key < edge and not a.unordered(key, edge)):
            v.add(f"{user!r}: the page after cursor {cursor} repeats or goes back to post {item['post_id']}",
                  prev, op)
            return
    if not a.quiet(op):
        return
    got = [a.key(i) for i in _items(op)]
    limit = int(op.args.get("limit") or 20)
    model = a.model(op, upto=min(got) if got else None)
    if model is None:
        return
    live, guaranteed = model
    floor = got[-1] if len(got) >= limit else (float("-inf"), "")  # a full page only vouches down to its end
    if not a.rules.ties_known:
        got, live, guaranteed = _comparable(a, op, got, live, guaranteed)
    shown = set(got)
    settled = op.value.get("backlog") == 0
    # only the posts the inbox cap guarantees are vouched for: beyond it an inbox author's older posts
    # are gone while a pulled author's still show (the hybrid design), so a page there may leave some out
    for key in live[:guaranteed]:
        if key <= floor:
            break
        if key in shown:
            continue
        visible = (settled or a.shown_before(user, key[1], op.invoke_seq)
                   or op.invoke_time - a.published_at.get(key[1], op.invoke_time) >= a.window)
        if visible:
            v.add(f"{user!r}: the page after cursor {cursor} skips post {key[1]} (t={key[0]:.3f}), which was "
                  f"certainly visible and lies between the previous page's last post and this page's end", prev, op)
            return
