"""The 90-day availability calendar and start windows for a 2,000-node fleet with real
bookings, against one primary-key lookup as the baseline in the same run."""

import random
import statistics
import time
from datetime import timedelta

import pytest

from accounts.roles import acting_as
from catalog.demo import seed_catalog
from catalog.models import GpuModel
from core.db import db_now
from rentals.selectors.availability import availability_days, start_windows
from rentals.services import allocation_book, quote_create
from tests.perf.conftest import h100_fleet, report

pytestmark = pytest.mark.django_db(transaction=True)
NODES = 2000
BOOKINGS = 600


def _median_ms(call, runs=5):
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def test_a_90_day_calendar_for_2000_nodes(django_user_model):
    seed_catalog()
    h100_fleet("av", NODES, spread_regions=True)
    model = GpuModel.objects.get(slug="h100-sxm")
    acting = acting_as(django_user_model.objects.create_user("bench"))
    rng = random.Random(7)
    now = db_now()
    booked = 0
    for _ in range(BOOKINGS):  # real bookings, spread over the next 60 days
        starts_at = now + timedelta(days=rng.randint(0, 60), hours=rng.randint(1, 23))
        quote = quote_create(
            acting=acting, gpu_model="h100-sxm", gpu_count=rng.choice([1, 2, 4, 8]),
            period=rng.choice(["day", "week"]), period_count=1, starts_at=starts_at,
        )  # fmt: skip
        allocation_book(acting=acting, quote=quote)
        booked += 1
    baseline = _median_ms(lambda: GpuModel.objects.get(pk=model.pk))
    calendar = _median_ms(lambda: availability_days(gpu_model=model, start=now, days=90))
    windows = _median_ms(
        lambda: start_windows(
            gpu_model=model, duration=timedelta(days=7), not_before=now, gpu_count=8
        )  # fmt: skip
    )
    report(
        f"availability: {NODES} nodes × 8 GPUs of one model, {booked} bookings, 90 days",
        {
            "primary-key lookup (baseline)": {"median_ms": baseline},
            "calendar (one statement)": {"median_ms": calendar, "ratio": calendar / baseline},
            "start windows, 8 GPUs × a week": {"median_ms": windows, "ratio": windows / baseline},
        },
    )
