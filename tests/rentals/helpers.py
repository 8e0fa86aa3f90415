import uuid

from django.db import connection

from accounts.access import acting_as
from rentals.services import allocation_book, quote_create


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
