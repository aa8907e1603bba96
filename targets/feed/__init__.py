"""Case F, news feed: the reference target (hybrid fan-out, CQRS, capped inboxes), served under /feed."""

from .core import POLICIES, Backpressure, FeedCore, FeedError, InvalidRequest, Post, UnknownPost

__all__ = ["POLICIES", "Backpressure", "FeedCore", "FeedError", "InvalidRequest", "Post", "UnknownPost"]
