"""Case C, a throwaway counter: a fourth case that lives entirely in its own folder.

``core`` (the pure counter), ``app`` (its raw ASGI target), ``driver`` (the protocol and its
drivers), ``checks`` (the two promises, registered on ``COUNTER``), ``report`` (its load report, pure). Registered with ``PEAKPROOF_CASES=counter_case``.
"""

from .checks import COUNTER, COUNTER_CHECKS, CounterHistory, check_counter, counter_never_goes_back, every_increment_counted, observations
from .core import MAX_BY, POLICIES, CounterCore, CounterError, Pending, validate_by
from .driver import CounterDriver, HttpCounter, InProcessCounter, parse_value

__all__ = ["CounterCore", "CounterError", "Pending", "POLICIES", "MAX_BY", "validate_by", "CounterDriver",
           "InProcessCounter", "HttpCounter", "parse_value", "COUNTER", "COUNTER_CHECKS", "CounterHistory", "check_counter",
           "counter_never_goes_back", "every_increment_counted", "observations"]

# what the property fixtures build (peakproof.pytest_plugin.Target)
PROTOCOL, IN_PROCESS, OVER_HTTP = CounterDriver, InProcessCounter, HttpCounter

from .case import CASE  # noqa: E402  (the registry reads it)
