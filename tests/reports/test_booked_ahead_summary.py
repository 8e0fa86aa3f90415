"""Booked-ahead from the capacity read model: while every model's summary is fresh the
fleet report reads its days (BookedAheadDay) and says "as of" (en, pl); the figures equal
the exact read's as of the refresh. Stale or missing, the report reads the holdings and says
nothing of the kind."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from catalog.models import GpuModel
from rentals.models import CapacitySummary
from rentals.services.summary import capacity_summary_refresh
from reports.selectors import booked_ahead, held_ahead
from tests.support.booking import book

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def _refresh_all():
    for pk in GpuModel.objects.values_list("pk", flat=True):
        assert isinstance(capacity_summary_refresh(gpu_model_id=pk), float)


def _days(rows):
    return {row["model"]["slug"]: [d["gpu_days"] for d in row["days"]] for row in rows}


def _bookings(alice):
    now = timezone.now()
    book(alice, model="h100", count=2, period="day", periods=2, starts_at=now + DAY)
    book(alice, model="h100", count=1, period="week")
    book(alice, model="l4", count=3, period="day", starts_at=now + timedelta(hours=30))


def test_a_fresh_summary_gives_the_exact_reads_figures_as_of_its_refresh(catalog, alice):
    _bookings(alice)
    now = timezone.now()
    step = (now.replace(minute=0, second=0, microsecond=0), now + timedelta(hours=1))
    exact = held_ahead(now=now, step=step)
    assert exact.as_of is None and all(row["as_of"] is None for row in exact.rows)
    _refresh_all()
    read = held_ahead(now=now, step=step)
    as_of = CapacitySummary.objects.order_by("as_of").first().as_of
    assert read.as_of == as_of
    assert _days(read.rows) == _days(exact.rows)
    assert sum(_days(read.rows)["l4"]) == 3.0 and sum(_days(read.rows)["h100"]) > 4.0
    assert (read.allocated_now, read.allocated_in_step) == (exact.allocated_now,
                                                            exact.allocated_in_step) == (1, 1)  # fmt: skip
    assert all(row["as_of"] is not None for row in read.rows)


def test_a_stale_or_missing_summary_reads_the_holdings(catalog, alice):
    _refresh_all()
    book(alice, model="l4", count=4, period="day", starts_at=timezone.now() + DAY)
    # fresh: the summary's figures, as of before this booking (the page says so)
    assert sum(_days(booked_ahead(now=timezone.now()))["l4"]) == 0.0
    CapacitySummary.objects.update(as_of=timezone.now() - timedelta(minutes=3))
    stale = booked_ahead(now=timezone.now())
    assert sum(_days(stale)["l4"]) == 4.0 and all(row["as_of"] is None for row in stale)
    # one model without a summary is enough to read them all exactly
    _refresh_all()
    CapacitySummary.objects.filter(gpu_model__slug="mi300x").delete()
    assert sum(_days(booked_ahead(now=timezone.now()))["l4"]) == 4.0


def test_the_fleet_report_says_as_of_only_when_it_read_the_summary(catalog, alice, staff, client):
    _bookings(alice)
    client.force_login(staff)
    page = client.get("/usage/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'id="booked-as-of"' not in page
    cache.clear()  # the report's copy of this minute
    _refresh_all()
    as_of = timezone.localtime(CapacitySummary.objects.order_by("as_of").first().as_of)
    for language, words in (("en", "As of"), ("pl", "Stan na")):
        page = client.get("/usage/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
        assert f"{words} {as_of:%H:%M:%S}" in page, language
    api = client.get("/api/v1/usage/booked-ahead/").json()
    assert {row["model"] for row in api} == {"h100", "l4", "mi300x"}
    assert all(row["as_of"] is not None for row in api)
