"""Case F, news feed: ``driver`` (the protocol and its drivers), ``workload`` (the peak at a
scale), ``checks`` (the eight invariants over one :class:`FeedAnalysis`)."""

from .checks import FEED_CHECKS, FeedAnalysis, check_feed
from .driver import FeedDriver, HttpFeed, InProcessFeed, post_json
from .workload import FeedWorkload

__all__ = ["FeedDriver", "InProcessFeed", "HttpFeed", "post_json", "FeedWorkload", "FEED_CHECKS", "FeedAnalysis",
           "check_feed"]

# what the property fixtures build (peakproof.pytest_plugin.Target)
PROTOCOL, IN_PROCESS, OVER_HTTP = FeedDriver, InProcessFeed, HttpFeed

from .case import CASE  # noqa: E402  (the registry reads it)
