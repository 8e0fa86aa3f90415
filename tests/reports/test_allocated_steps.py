"""The dashboard's closed steps: written once, read as the holdings count them, and never
written while a booking that could still add to them is open."""

import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.roles import acting_as
from rentals.models import AllocationGpu, LedgerEntry, LedgerKind
from rentals.services import allocation_cancel
from reports.models import AllocatedStep, LedgerDay, Step
from reports.selectors import fleet_over_time, fleet_report, revenue, step_for
from reports.services import allocated_steps_close
from telemetry.rollup import bucket_floor
from tests.support.booking import book, book_around_three_days

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("days", [2, 30])
def test_closed_steps_are_read_as_the_holdings_count_them_and_only_the_open_one_live(
    catalog, alice, days
):
    base = book_around_three_days(alice)
    end = base + timedelta(days=3, minutes=30)
    step = step_for(days)
    bucket = Step.HOUR if step == timedelta(hours=1) else Step.DAY
    live = fleet_over_time(start=end - timedelta(days=days), end=end, step=step)

    # Every step before `end`'s has closed: 91 days of them back from there, on a first run.
    assert allocated_steps_close(now=end) == {Step.HOUR: 91 * 24, Step.DAY: 91}
    assert allocated_steps_close(now=end) == {Step.HOUR: 0, Step.DAY: 0}  # each step once
    with CaptureQueriesContext(connection) as ctx:
        kept = fleet_over_time(start=end - timedelta(days=days), end=end, step=step)
    assert kept == live
    counted = [q["sql"] for q in ctx.captured_queries if "generate_series" in q["sql"]]
    assert len(counted) == 1  # the holdings, for the open step alone
    closed = AllocatedStep.objects.filter(
        bucket=bucket, at__gte=bucket_floor(end - timedelta(days=days), bucket), at__lte=end
    )
    assert closed.count() == len(kept) - 1
    holdings = list(AllocationGpu.objects.filter(released=False, allocation__isnull=False))
    assert any(row.gpus for row in closed)
    for point in kept:
        h = datetime.fromisoformat(point["t"])
        expected = sum(1 for g in holdings if g.starts_at < h + step and g.ends_at > h)
        assert point["allocated"] == expected, point


def test_a_step_is_not_closed_while_a_transaction_begun_in_it_is_open(catalog, alice):
    """Another session's open transaction (a booking between reading the clock and its
    commit) may still add holdings from its start on: the steps up to its start close, the
    one it began in waits for it to end."""
    other = _other_session()
    try:
        began = other.execute("SELECT transaction_timestamp()").fetchone()[0]
        later = began + timedelta(hours=3)
        allocated_steps_close(now=later)
        newest = AllocatedStep.objects.filter(bucket=Step.HOUR).latest("at").at
        assert newest == bucket_floor(began, Step.HOUR) - timedelta(hours=1)
        other.rollback()
        assert allocated_steps_close(now=later)[Step.HOUR] == 3
    finally:
        other.close()
    newest = AllocatedStep.objects.filter(bucket=Step.HOUR).latest("at").at
    assert newest == bucket_floor(later, Step.HOUR) - timedelta(hours=1)


def _other_session():
    db = connection.settings_dict
    return psycopg.connect(
        dbname=db["NAME"], user=db["USER"] or None, password=db["PASSWORD"] or None,
        host=db["HOST"] or None, port=db["PORT"] or None,
    )  # fmt: skip


def test_nothing_closes_while_a_session_this_role_cannot_see_is_connected(catalog, caplog):
    """Without pg_read_all_stats a role sees only its own sessions' transactions: another
    role's session could be a booking about to commit, so no step closes while it is there."""
    role = f"anchorgpu_stranger_{uuid.uuid4().hex[:8]}"
    now = timezone.now()
    other = _other_session()  # the superuser's: this role cannot see what it is doing
    try:
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE ROLE "{role}"')  # the test's transaction drops it again
            cursor.execute(f'SET LOCAL ROLE "{role}"')
        assert allocated_steps_close(now=now) == {Step.HOUR: 0, Step.DAY: 0}
        assert "grant it pg_read_all_stats" in caplog.text
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
        assert allocated_steps_close(now=now) == {Step.HOUR: 91 * 24, Step.DAY: 91}
    finally:
        other.close()


def test_kept_steps_are_read_only_as_far_as_they_run_unbroken_from_the_first(catalog, alice):
    """A step the task has not written, and every one after it, is counted from the
    holdings: kept rows past a gap are not read (here, changed by hand to tell them apart)."""
    now = timezone.now()
    book(alice, model="h100", count=3, period="day")  # from now, in the open hour
    allocated_steps_close(now=now)
    start = now - timedelta(hours=6)
    hours = [bucket_floor(start, Step.HOUR) + timedelta(hours=i) for i in range(7)]
    kept = AllocatedStep.objects.filter(bucket=Step.HOUR)
    kept.filter(at=hours[1]).update(gpus=7)
    kept.filter(at__in=[hours[3], hours[5]]).update(gpus=9)
    kept.filter(at=hours[4]).delete()
    points = fleet_over_time(start=start, end=now, step=timedelta(hours=1))
    assert [p["t"] for p in points] == [h.isoformat() for h in hours]
    assert [p["allocated"] for p in points] == [0, 7, 0, 9, 0, 0, 3]


@pytest.mark.parametrize("days", [7, 90])
def test_the_dashboard_counts_its_open_step_in_the_booked_ahead_read(catalog, alice, days):
    now = timezone.now()
    book(alice, model="h100", count=2, period="day")
    book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(hours=3))
    book(alice, model="h100", count=4, period="week", starts_at=now + timedelta(days=2))
    allocated_steps_close(now=now)
    step = step_for(days)
    with CaptureQueriesContext(connection) as ctx:
        board = fleet_report(days=days, now=now)
    assert not [q for q in ctx.captured_queries if "generate_series" in q["sql"]]
    read_alone = fleet_over_time(start=now - timedelta(days=days), end=now, step=step)
    assert board["over_time"] == read_alone
    h = datetime.fromisoformat(board["over_time"][-1]["t"])
    holdings = AllocationGpu.objects.filter(released=False, allocation__isnull=False)
    expected = sum(1 for g in holdings if g.starts_at < h + step and g.ends_at > h)
    assert board["over_time"][-1]["allocated"] == expected >= 2


def test_revenue_reads_closed_days_as_summed_and_the_hours_around_them_from_the_ledger(
    catalog, alice
):
    now = timezone.now()
    day0 = bucket_floor(now, Step.DAY)
    start = day0 - timedelta(days=4) + timedelta(hours=5)  # not a midnight
    for _ in range(6):
        book(alice, model="h100", count=1, period="day")
    ahead = book(alice, model="h100", count=2, period="day", starts_at=now + timedelta(hours=6))
    allocation_cancel(acting=acting_as(alice), allocation=ahead)  # a refund
    # The ledger's rows moved into the past: around the range's start, on its whole days,
    # and in the day still open.
    times = [start - timedelta(minutes=1), start, day0 - timedelta(days=3),
             day0 - timedelta(days=2, hours=-12), day0 - timedelta(minutes=1),
             now - timedelta(minutes=1), day0 - timedelta(days=1, hours=-3),
             day0 - timedelta(days=1, hours=-4)]  # fmt: skip
    for entry, at in zip(LedgerEntry.objects.order_by("id"), times, strict=True):
        LedgerEntry.objects.filter(pk=entry.pk).update(at=at)
    live = revenue(start=start, end=now)

    allocated_steps_close(now=now)
    kept_days = LedgerDay.objects.filter(at__gte=day0 - timedelta(days=3), at__lt=day0)
    assert kept_days.values("at").distinct().count() == 3
    assert revenue(start=start, end=now) == live
    rows = LedgerEntry.objects.filter(at__gte=start, at__lt=now)
    charges, refunds, _credits = live
    assert sum(r["bookings"] for r in charges) == rows.filter(kind=LedgerKind.CHARGE).count() == 6
    assert sum(r["amount"] for r in charges) == sum(r.net for r in rows if r.kind == "charge")
    assert refunds == {"USD": sum(r.net for r in rows if r.kind == "refund")} and refunds["USD"]
    # The kept days are what is read for them (changed by hand here, to tell them apart).
    kept_days.filter(kind=LedgerKind.CHARGE).update(net=F("net") + 1000)
    changed = revenue(start=start, end=now)[0]
    assert sum(r["amount"] for r in changed) == sum(r["amount"] for r in charges) + 3000
