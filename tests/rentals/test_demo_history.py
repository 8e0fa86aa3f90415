"""A new demo is populated: 30 days of believable history behind the first screen."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from catalog.demo import seed_catalog, seed_users
from catalog.models import Gpu
from rentals.demo import seed_rentals
from rentals.models import Allocation, AllocationGpu, AllocationState, LedgerEntry
from rentals.selectors.allocation_usage import allocation_usage
from reports.demo import seed_history
from reports.selectors import fleet_report
from reports.services import allocated_steps_close

pytestmark = pytest.mark.django_db


def test_a_new_demo_has_thirty_days_of_history(settings, client, django_user_model):
    seed_catalog()
    seed_users(password="pw-demo-123456")
    seed_rentals()
    now = timezone.now()
    allocated_steps_close(now=now)  # beat's task, before the past below was written
    assert seed_history(now=now) is True
    assert seed_history(now=now) is False  # once: a second run adds nothing

    assert Allocation.objects.filter(state=AllocationState.EXPIRED).count() >= 10
    assert Allocation.objects.filter(paid_from__lt=now - timedelta(days=20)).exists()
    assert LedgerEntry.objects.filter(at__lt=now - timedelta(days=20)).exists()

    dashboard = fleet_report(days=30, now=now)
    points = dashboard["over_time"]
    fleet = Gpu.objects.count()  # the demo's 112 GPUs
    assert len(points) == 31 and all(p["total"] == fleet == 112 for p in points[:-1])
    assert sum(1 for p in points[:-1] if p["busy"] > 0) >= 25  # busy most days, not flat lines
    # Today is not closed: read from its newest rolled-up minute, none before the first run.
    assert points[-1]["busy"] is None and points[-1]["busy_until"] is None
    assert max(p["allocated"] for p in points) >= 16
    holdings = list(AllocationGpu.objects.filter(released=False, allocation__isnull=False))
    for p in points:  # each day as its holdings count it, whatever beat's task closed before
        day = datetime.fromisoformat(p["t"])
        held = sum(1 for g in holdings if g.starts_at < day + timedelta(days=1) and g.ends_at > day)
        assert (p["allocated"] or 0) == held, p
    assert {row["name"] for row in dashboard["by_model"]} >= {"NVIDIA H200 SXM", "NVIDIA L4"}
    assert all(row["hours"] > 0 for row in dashboard["by_model"])
    assert dashboard["revenue"] and any(r["amount"] > 0 for r in dashboard["revenue"])
    allocated_steps_close(now=now)  # the past's steps, closed again: the same figures
    again = fleet_report(days=30, now=now)
    assert (again["over_time"], again["revenue"]) == (points, dashboard["revenue"])

    # GPU-hours run to thousands: grouped as the reader's language writes numbers
    hours = max(row["hours"] for row in dashboard["by_model"])
    assert hours >= 1000
    client.force_login(django_user_model.objects.create_user("dashboard-reader", is_staff=True))
    english = f"{hours:,.1f}"
    assert english in client.get("/usage/?days=30", HTTP_ACCEPT_LANGUAGE="en").text
    polish = english.replace(",", "\xa0").replace(".", ",")
    assert polish in client.get("/usage/?days=30", HTTP_ACCEPT_LANGUAGE="pl").text

    ended = Allocation.objects.filter(state=AllocationState.EXPIRED).order_by("paid_from").first()
    summary = allocation_usage(allocation=ended, now=now)
    assert not summary["partial"] and summary["util_avg"] > 50 and summary["energy_kwh"] > 0
