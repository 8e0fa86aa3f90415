"""Every bound on what one purchase may ask for, in one place.

The API serializers, the page forms and the services all read these, so no interface
accepts a request that another refuses for a different bound.
"""

from datetime import timedelta
from typing import TypeGuard

from django.conf import settings
from django.utils.translation import gettext as _

# An allocation holds GPUs on one node, so the largest node of the model caps it lower.
GPU_COUNT_MAX = 64
# Whole nodes in one cluster; the largest network group of the model caps it lower.
NODE_COUNT_MAX = 64
# Each option's own `max_quantity` caps it lower.
OPTION_QUANTITY_MAX = 10_000
# Options in one quote (each may be chosen once; the catalog has far fewer).
OPTIONS_MAX = 50


def period_count_max() -> int:
    """Most periods in one booking and in one extension (MAX_PERIOD_COUNT)."""
    return settings.ANCHORGPU["MAX_PERIOD_COUNT"]


def schedule_ahead_max() -> timedelta:
    """Furthest start of a scheduled booking (MAX_SCHEDULE_AHEAD_DAYS)."""
    return settings.ANCHORGPU["MAX_SCHEDULE_AHEAD"]


def within(value: object, low: int, high: int) -> TypeGuard[int]:
    """Whether `value` is a whole number (an int, not a bool) from `low` to `high`: what a
    service checks of a count, whichever interface parsed it."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def period_count_refusal(period_count) -> str | None:
    """Why `period_count` cannot be booked or extended by, or None when it can."""
    if within(period_count, 1, period_count_max()):
        return None
    return _("Period count must be between 1 and %(max)s.") % {"max": period_count_max()}
