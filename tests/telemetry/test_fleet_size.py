"""The fleet's size is kept per hour, whatever the polling rounds' rate."""

from datetime import UTC, datetime, timedelta

import pytest

from catalog.models import Gpu, Node, NodeState
from reports.selectors import fleet_over_time
from telemetry.models import FleetSize, GpuSample
from telemetry.poll import fleet_size_record

pytestmark = pytest.mark.django_db

T = datetime(2026, 11, 2, 10, tzinfo=UTC)


def test_the_rounds_of_an_hour_fold_into_its_largest_size(catalog):
    fleet = Gpu.objects.count()
    first = fleet_size_record(now=T + timedelta(minutes=1))
    assert (first.at, first.gpus) == (T, fleet)
    retired = Node.objects.order_by("pk").first()
    Node.objects.filter(pk=retired.pk).update(state=NodeState.RETIRED)
    fleet_size_record(now=T + timedelta(minutes=30))  # smaller: the hour keeps the larger
    next_hour = fleet_size_record(now=T + timedelta(hours=1, seconds=15))
    assert next_hour.gpus == fleet - retired.gpu_count
    rows = list(FleetSize.objects.order_by("at").values_list("at", "gpus"))
    assert rows == [(T, fleet), (T + timedelta(hours=1), fleet - retired.gpu_count)]

    points = fleet_over_time(start=T, end=T + timedelta(hours=2), step=timedelta(hours=1))
    assert [p["total"] for p in points] == [fleet, fleet - retired.gpu_count, None]
    days = fleet_over_time(start=T, end=T + timedelta(hours=2), step=timedelta(days=1))
    assert [p["total"] for p in days] == [fleet]  # the day's largest


def test_answering_is_unknown_until_a_round_has_polled(catalog):
    """The first round after a start records the fleet but not how many answered (nothing
    was polled yet): the hour takes the fewest answering of the rounds that polled."""
    first = fleet_size_record(now=T + timedelta(minutes=1))
    assert first.reporting is None
    gpus = list(Gpu.objects.order_by("pk")[:3])
    polled = T + timedelta(minutes=2)
    Node.objects.filter(pk__in={g.node_id for g in gpus}).update(last_poll_at=polled)
    for gpu in gpus:
        GpuSample.objects.create(gpu=gpu, at=polled, utilization=50)
    assert fleet_size_record(now=polled + timedelta(seconds=10)).reporting == 3
    GpuSample.objects.filter(gpu=gpus[0]).delete()  # a GPU stopped answering
    assert fleet_size_record(now=polled + timedelta(seconds=20)).reporting == 2
    points = fleet_over_time(start=T, end=T + timedelta(minutes=59), step=timedelta(hours=1))
    assert points[0]["reporting"] == 2
