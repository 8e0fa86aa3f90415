"""A holding's partial first and last hour, kept once that hour closes, so its figures stay
exact once raw samples are pruned; a boundary that moves gets an edge of its own."""

from datetime import UTC, datetime, timedelta

import pytest

from rentals.models import AllocationGpu, HoldingEdge
from rentals.models.edges import holding_edges
from rentals.services.edges import holding_edges_close
from telemetry.models import GpuSample
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
