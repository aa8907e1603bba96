"""Case F, news feed: the reference target (hybrid fan-out core). Work in progress: not yet served."""

from .core import POLICIES, Backpressure, FeedCore, FeedError, InvalidRequest, Post, UnknownPost

__all__ = ["POLICIES", "Backpressure", "FeedCore", "FeedError", "InvalidRequest", "Post", "UnknownPost"]
