"""Bookings made directly through the services, and the clock moved under them."""

import uuid
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from accounts.roles import acting_as
from rentals.services import allocation_book, allocation_cancel, quote_create


def book(
    user, *, model="h100", count=1, period="week", periods=1, starts_at=None, now=None,
    options=None, team=None,
):  # fmt: skip
    """Quote and book as `user`, for their personal team or `team`."""
    acting = acting_as(user, team)
    quote = quote_create(
        acting=acting, gpu_model=model, gpu_count=count, period=period, period_count=periods,
        starts_at=starts_at, options=options, now=now,
    )  # fmt: skip
    return allocation_book(acting=acting, quote=quote, now=now)


def book_around_three_days(user) -> datetime:
    """Bookings on both sides of the three days from the next midnight (back: that midnight),
    one of them cancelled before its start: what the dashboard's steps are counted on. From
    the next midnight, so which holdings reach the last step does not depend on the time of
    day a test runs at."""
    base = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    book(user, model="h100", count=1, period="day")
    for hours, period in [(5, "day"), (30, "day"), (50, "week"), (71.5, "day")]:
        book(user, model="h100", count=1, period=period, starts_at=base + timedelta(hours=hours))
    cancelled = book(user, model="h100", count=2, period="day", starts_at=base + timedelta(hours=2))
    allocation_cancel(acting=acting_as(user), allocation=cancelled)
    return base


def key():
    return str(uuid.uuid4())


def end_paid_periods_a_minute_ago():
    """Move every allocation's paid period into the past on the database clock.

    The guard trigger forbids exactly this, so it is switched off for the one statement.
    """
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE rentals_allocation DISABLE TRIGGER rentals_allocation_guard")
        cursor.execute(
            "UPDATE rentals_allocation SET paid_from = now() - interval '25 hours', "
            "paid_until = now() - interval '1 minute'"
        )
        cursor.execute("ALTER TABLE rentals_allocation ENABLE TRIGGER rentals_allocation_guard")
