"""A holding's partial first and last hour, kept once that hour closes, so its figures stay
exact once raw samples are pruned; a boundary that moves gets an edge of its own."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from rentals.models import AllocationGpu, HoldingEdge
from rentals.models.edges import holding_edges
from rentals.services.edges import holding_edges_close
from telemetry.models import GpuRollup, GpuSample
from telemetry.rollup import telemetry_rollup
from tests.support.booking import book

pytestmark = pytest.mark.django_db

T = datetime(2026, 3, 9, 10, 0, tzinfo=UTC)


def test_the_parts_of_a_range_that_are_not_whole_hours():
    m = timedelta(minutes=1)
    assert holding_edges(T + 20 * m, T + 50 * m) == [(T + 20 * m, T + 50 * m)]
    assert holding_edges(T, T + 60 * m) == []
    assert holding_edges(T, T + 90 * m) == [(T + 60 * m, T + 90 * m)]
    assert holding_edges(T + 20 * m, T + 180 * m) == [(T + 20 * m, T + 60 * m)]
    assert holding_edges(T + 20 * m, T + 150 * m) == [
        (T + 20 * m, T + 60 * m), (T + 120 * m, T + 150 * m)
    ]  # fmt: skip


def test_an_edge_is_kept_once_its_hour_closed_with_what_the_gpu_did_in_it(catalog, alice):
    allocation = book(alice, model="h100", count=2, period="day")
    holdings = list(AllocationGpu.objects.filter(allocation=allocation).order_by("gpu_id"))
    start = holdings[0].starts_at
    busy, idle = holdings
    # Samples every 15 s from before the booking to two hours after: only the busy GPU's
    # from the booking on count for it; the idle GPU reported nothing.
    GpuSample.objects.bulk_create(
        GpuSample(gpu_id=busy.gpu_id, at=start + timedelta(seconds=15 * i), utilization=80.0,
                  energy_j=1000.0 + 15 * i)
        for i in range(-8, 2 * 240)
    )  # fmt: skip
    first_end = (start + timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    telemetry_rollup(now=first_end)  # the hour has not closed yet (its last minute once)
    assert holding_edges_close() == 0
    telemetry_rollup(now=first_end + timedelta(minutes=1))
    assert holding_edges_close() == 2 and holding_edges_close() == 0
    edges = {e.holding_id: e for e in HoldingEdge.objects.all()}
    assert {(e.start, e.end) for e in edges.values()} == {(start, first_end)}
    inside = [start + timedelta(seconds=15 * i) for i in range(0, 240)]
    inside = [at for at in inside if at < first_end]
    mine = edges[busy.pk]
    assert (mine.samples, mine.util_sum / mine.util_samples) == (len(inside), 80.0)
    assert mine.energy_j == pytest.approx(15.0 * len(inside))  # the first rise from before
    assert edges[idle.pk].samples == 0 and edges[idle.pk].energy_j is None


def test_the_conversion_keeps_edges_from_the_former_minute_rows_then_empties_them(
    catalog, alice, settings
):
    """Raw samples long pruned, the former per-GPU minute rollups still there: an edge is
    kept from the whole minutes inside it (the seconds around were only ever in raw
    samples); a second run writes nothing; --truncate empties the former table."""
    # Booked three hours ago at 20 min 7 s past the hour, so its first hour holds whole
    # minutes whatever the time now (at a minute to the hour it would hold none).
    booked_at = timezone.now().replace(minute=20, second=7, microsecond=0) - timedelta(hours=3)
    allocation = book(alice, model="h100", count=1, period="day", now=booked_at)
    # A raw retention that has pruned everything before now: the booking's start too.
    settings.ANCHORGPU = {**settings.ANCHORGPU, "RAW_RETENTION": timedelta(0)}
    holding = AllocationGpu.objects.get(allocation=allocation)
    start = holding.starts_at
    first_minute = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    hour_end = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    minutes = [first_minute - timedelta(minutes=1)]  # the minute it started in: partial
    at = first_minute
    while at < hour_end:
        minutes.append(at)
        at += timedelta(minutes=1)
    GpuRollup.objects.bulk_create(
        GpuRollup(gpu_id=holding.gpu_id, bucket="minute", at=at, samples=4, utilization_avg=50.0,
                  utilization_max=60.0, energy_j=100.0, covered_s=60.0, busy_s=60.0)
        for at in minutes
    )  # fmt: skip
    out = StringIO()
    call_command("holding_edges_convert", stdout=out)
    edge = HoldingEdge.objects.get()
    whole = len(minutes) - 1
    assert (start, whole) == (booked_at, 39)
    assert (edge.start, edge.end) == (start, hour_end)
    assert (edge.samples, edge.util_sum, edge.util_samples) == (4 * whole, 200.0 * whole, 4 * whole)
    assert (edge.energy_j, edge.covered_s, edge.util_max) == (100.0 * whole, 60.0 * whole, 60.0)
    assert "1 from minute rows" in out.getvalue()
    call_command("holding_edges_convert", "--truncate", stdout=StringIO())
    assert HoldingEdge.objects.count() == 1  # kept once
    assert not GpuRollup.objects.exists()


def test_an_edge_is_kept_when_the_samples_begin_after_the_holding(catalog, alice):
    """Polling that began after the booking (the first samples after its start) still has
    every raw sample of the edge: the edge is kept from them."""
    # Booked at 20 min 7 s past an hour two hours ago, so the three samples fall inside its
    # first hour whatever the time now (a minute before the hour the last would not).
    booked_at = timezone.now().replace(minute=20, second=7, microsecond=0) - timedelta(hours=2)
    allocation = book(alice, model="h100", count=1, period="day", now=booked_at)
    holding = AllocationGpu.objects.get(allocation=allocation)
    start = holding.starts_at
    GpuSample.objects.bulk_create(
        GpuSample(gpu_id=holding.gpu_id, at=start + timedelta(seconds=1 + 15 * i),
                  utilization=50.0)
        for i in range(3)
    )  # fmt: skip
    hour_end = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    telemetry_rollup(now=hour_end + timedelta(minutes=1))
    assert holding_edges_close() == 1
    edge = HoldingEdge.objects.get()
    assert (start, edge.start, edge.end, edge.samples) == (booked_at, booked_at, hour_end, 3)
