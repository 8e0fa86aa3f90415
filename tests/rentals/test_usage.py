from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.access import acting_as
from rentals.dashboard import fleet_dashboard
from rentals.services import allocation_start, allocation_stop
from rentals.usage import allocation_usage
from tests.rentals.helpers import book

pytestmark = pytest.mark.django_db


def test_booked_gpu_days_ahead_counts_only_what_is_booked(catalog, alice):
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    book(alice, model="h100", count=2, period="day", periods=2, starts_at=now + timedelta(days=1))
    heat = {row["model"].slug: row for row in fleet_dashboard(now=now)["heatmap"]}
    assert [d["gpu_days"] for d in heat["h100"]["days"][:4]] == [0.0, 2.0, 2.0, 0.0]
    assert heat["h100"]["capacity"] == 20
    assert sum(d["gpu_days"] for d in heat["l4"]["days"]) == 0.0


def test_stopped_time_is_paid_time_in_the_usage_summary(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day")
    start = allocation.paid_from
    allocation_stop(acting=acting_as(alice), allocation=allocation, now=start + timedelta(hours=2))
    allocation_start(acting=acting_as(alice), allocation=allocation, now=start + timedelta(hours=5))
    allocation.refresh_from_db()
    summary = allocation_usage(allocation=allocation, now=start + timedelta(hours=6))
    assert (summary["paid_hours"], summary["stopped_hours"], summary["running_hours"]) == (
        6.0,
        3.0,
        3.0,
    )
    assert summary["hours_left"] == 18.0
    dashboard = fleet_dashboard(now=start + timedelta(hours=6))
    assert dashboard["stopped_gpu_hours"] == 3.0


def test_list_pages_have_pinned_query_counts(catalog, alice, client, django_assert_max_num_queries):
    client.force_login(alice)
    for _ in range(3):
        book(alice, model="h100", count=1, period="day")

    def queries(url):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    counts = {url: queries(url) for url in ("/allocations/", "/statement/", "/")}
    for _ in range(5):
        book(alice, model="h100", count=1, period="day")
    assert {url: queries(url) for url in counts} == counts
