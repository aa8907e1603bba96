"""The notifications checks, assembled: every promise module registers its checks on
:data:`~peakproof.cases.notifications.analysis.NOTIFICATIONS`; importing them here fills the list in
this order: delivery, the breaker, priority, answers.

What the operations are and how uncertainty is treated: :mod:`peakproof.cases.notifications.analysis`.
"""

from __future__ import annotations

from typing import Any, Iterable

from peakproof.checks import CheckResult
from peakproof.history import History, Op
from . import delivery  # noqa: F401  isort: skip  (each registers its checks, in this order)
from . import breaker  # noqa: F401  isort: skip
from . import priority  # noqa: F401  isort: skip
from . import answers  # noqa: F401  isort: skip
from .analysis import IN_VIRTUAL_TIME, NOTIFICATIONS, STATUS_RANK, DeliveryRules, NotificationsAnalysis
from .answers import answers_belong_to_who_asked
from .breaker import DECIDED_BEFORE, breaker_counts_only_transient, breaker_opens_when_due, preference_respected
from .delivery import (attempt_budget_respected, delivery_ratio_at_least, formatting_within_channel_limits,
                       no_retry_after_permanent_on_same_channel, one_delivery_per_event, status_matches_providers,
                       status_moves_forward, urgent_mean_latency)
from .priority import (AHEAD_SHARE, BACKLOG_TIMES, MIN_HELD, urgent_first_outside_a_backlog,
                       urgent_overtakes_reminder_backlog)

__all__ = ["STATUS_RANK", "DeliveryRules", "IN_VIRTUAL_TIME", "NotificationsAnalysis", "one_delivery_per_event",
           "delivery_ratio_at_least", "attempt_budget_respected", "no_retry_after_permanent_on_same_channel",
           "DECIDED_BEFORE", "preference_respected", "breaker_counts_only_transient", "breaker_opens_when_due",
           "status_matches_providers",
           "status_moves_forward", "formatting_within_channel_limits", "urgent_mean_latency", "MIN_HELD",
           "BACKLOG_TIMES", "AHEAD_SHARE", "urgent_overtakes_reminder_backlog", "urgent_first_outside_a_backlog",
           "answers_belong_to_who_asked", "NOTIFICATIONS_CHECKS", "SATURATION_CHECKS", "DUE_CHECKS", "check_notifications",
           "check_analysis"]

NOTIFICATIONS_CHECKS = tuple(NOTIFICATIONS)
# Put to the test only when delivery saturates: a run that never saturated it (the peak, when the
# target keeps up) leaves them out; a run meant to saturate it (a flood) must exercise them.
SATURATION_CHECKS = ("urgent_overtakes_reminder_backlog",)
# Put to the test when a breaker falls due, or would if it counted permanent failures: a run that drives no
# channel down (the peak) reports them only if that happened all the same (a staging service's own failures,
# a burst of dead addresses: in a short peak on Beacon's stack, one run in three met none); one that drives a
# channel down must.
DUE_CHECKS = ("breaker_opens_when_due", "breaker_counts_only_transient")


def check_notifications(history: History | Iterable[Op], calls: list[dict[str, Any]], *,
                        rules: DeliveryRules = DeliveryRules(), threshold: float = 0.99,
                        channel_calls: list[dict[str, Any]] | None = None, answer_latency: float = 0.0,
                        saturated: bool = True, drives_down: bool = True) -> list[CheckResult]:
    """Every notification invariant over one shared analysis of the history and the providers'
    record (``calls``), judged against the target's ``rules``. ``saturated=False`` leaves out
    :data:`SATURATION_CHECKS` (a workload that was not meant to saturate delivery);
    ``drives_down=False`` leaves out :data:`DUE_CHECKS` that had no chance (a workload that
    drives no channel down)."""
    a = NotificationsAnalysis(history, calls, channel_calls=channel_calls, answer_latency=answer_latency,
                              **rules.judging())
    return check_analysis(a, threshold=threshold, saturated=saturated, drives_down=drives_down)


def check_analysis(a: NotificationsAnalysis, *, threshold: float = 0.99, saturated: bool = True,
                   drives_down: bool = True) -> list[CheckResult]:
    """:func:`check_notifications` over an analysis already built (a report reads the same one)."""
    results = [check(a) if check is not delivery_ratio_at_least else check(a, threshold) for check in NOTIFICATIONS
               if saturated or check.__name__ not in SATURATION_CHECKS]
    return [r for r in results if drives_down or r.name not in DUE_CHECKS or r.chances]
