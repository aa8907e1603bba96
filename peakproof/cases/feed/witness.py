"""Case F's witnesses: a violation bears on one reader and the authors they follow; its witness is that
reader's follows (sent first: the graph a replay rebuilds on fresh users), the posts those authors
published and deleted, and the reader's reads, up to the violating read."""

from __future__ import annotations

from typing import Any, Sequence

from peakproof.checks import CheckResult
from peakproof.history import OK, Op
from peakproof.witness import CaseWitness, Step


class FeedWitness(CaseWitness):
    fresh = ("user_id", "followee_id", "author_id")
    produced = {"post_id": "post_id", "next_cursor": "cursor"}
    actors = ()
    setup = ("follow",)

    def find(self, history: Sequence[Op], result: CheckResult) -> tuple[str, list[Op]] | None:
        from .analysis import FeedAnalysis

        reads = [op for e in result.examples for op in (e if isinstance(e, tuple) else (e,))
                 if isinstance(op, Op) and op.f == "read"]
        if not reads:
            return None
        last = max(reads, key=lambda o: o.complete_seq)
        reader, end = last.args.get("user_id"), last.complete_seq
        a = FeedAnalysis(list(history))
        _, ever = a._following.get(id(last), (set(), set()))
        authors = set(ever) | {i.get("author_id") for op in reads if isinstance(op.value, dict)
                               for i in op.value.get("items", []) if isinstance(i, dict)}
        posts = {op.value.get("post_id") for op in history if op.f == "publish" and op.type == OK
                 and isinstance(op.value, dict) and op.args.get("author_id") in authors}
        ops: list[Op] = []
        followed: set[str] = set()
        for op in history:
            if op.invoke_seq > end:
                continue
            if op.f in ("follow", "unfollow") and op.args.get("user_id") == reader and op.type != "fail":
                ops.append(op)
                followed.add(op.args.get("followee_id"))
            elif (op.f == "publish" and op.args.get("author_id") in authors and op.type != "fail") or (
                    op.f == "delete" and op.args.get("post_id") in posts and op.type != "fail") or (
                    op.f == "read" and op.args.get("user_id") == reader):
                ops.append(op)
        # follows loaded in bulk (a load's graph) become single follows of this reader, sent first
        first = min((op.invoke_seq for op in ops), default=0)
        ops += [Op("graph", "follow", {"user_id": reader, "followee_id": author}, first - 1, 0.0, type=OK,
                   complete_seq=first - 1, complete_time=0.0, value={})
                for author in sorted(a for a in ever - followed if a is not None)]
        return f"reader {reader!r} and the {len(authors):,} author(s) they follow", ops

    def send(self, driver: Any, step: Step, args: dict[str, Any], process: str, intended: float | None) -> Op:
        """The protocol's positional arguments, from the names the history records them by."""
        import inspect

        positional = {"follow": ("user_id", "followee_id"), "unfollow": ("user_id", "followee_id"),
                      "publish": ("author_id", "text"), "delete": ("post_id",),
                      "read": ("user_id", "limit", "cursor")}[step.f]
        method = getattr(driver, step.f)
        timed = {"intended_time": intended} if "intended_time" in inspect.signature(method).parameters else {}
        values = [args.get(k) for k in positional]
        if step.f == "read" and values[1] is None:
            values[1] = 20
        return method(*values, process=process, **timed)

    def checks(self, driver: Any, ops: list[Op], spec: Any) -> list[CheckResult]:
        from .case import rules_of
        from .checks import check_feed

        return check_feed(ops, rules=rules_of(spec))


WITNESS = FeedWitness()
