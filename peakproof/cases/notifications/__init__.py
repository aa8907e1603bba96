"""Case N, notifications: ``driver`` (the protocol and its drivers), ``workload`` (the peak
minute), ``checks`` (the twelve invariants and the urgent-latency SLO over one
:class:`NotificationsAnalysis`)."""

from .checks import (IN_VIRTUAL_TIME, NOTIFICATIONS_CHECKS, SATURATION_CHECKS, DeliveryRules, NotificationsAnalysis,
                     check_notifications, delivery_ratio_at_least, urgent_mean_latency,
                     urgent_first_outside_a_backlog, urgent_overtakes_reminder_backlog)
from .driver import (HttpNotifications, InProcessNotifications, NotificationsDriver, Providers, notification_json,
                     provider_record)
from .workload import PeakMinute, peak_minute

__all__ = ["NotificationsDriver", "InProcessNotifications", "HttpNotifications", "notification_json", "Providers",
           "provider_record",
           "PeakMinute", "peak_minute", "NOTIFICATIONS_CHECKS", "NotificationsAnalysis", "check_notifications",
           "delivery_ratio_at_least", "urgent_mean_latency", "DeliveryRules", "IN_VIRTUAL_TIME", "SATURATION_CHECKS",
           "urgent_overtakes_reminder_backlog", "urgent_first_outside_a_backlog"]

# what the property fixtures build (peakproof.pytest_plugin.Target)
PROTOCOL, IN_PROCESS, OVER_HTTP = NotificationsDriver, InProcessNotifications, HttpNotifications

from .case import CASE  # noqa: E402  (the registry reads it)
