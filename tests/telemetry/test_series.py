"""The charts' series: raw samples for short ranges, minute points computed from raw samples
while they are kept, hourly points from GPU hours beyond (and the response says so)."""

from datetime import UTC, datetime, timedelta

import pytest

from telemetry.models import GpuSample
from telemetry.rollup import telemetry_rollup
from telemetry.selectors import gpu_series

pytestmark = pytest.mark.django_db

T = datetime(2026, 3, 9, 10, 0, tzinfo=UTC)


@pytest.fixture
def two_hours(catalog):
    """One GPU sampled every 15 s for two hours from T, 20 % in the first, 60 % in the
    second; the rollup has closed both hours."""
    gpu = catalog.nodes[0].gpus.first()
    GpuSample.objects.bulk_create(
        GpuSample(gpu=gpu, at=T + timedelta(seconds=15 * i), utilization=20.0 if i < 240 else 60.0,
                  power_w=100.0, energy_j=100.0 * 15 * i)
        for i in range(480)
    )  # fmt: skip
    telemetry_rollup(now=T + timedelta(hours=2, minutes=1))
    return gpu


def _points(series):
    (gpu,) = series["gpus"]
    return [(datetime.fromisoformat(p["t"]), p["util"]) for p in gpu["points"]]


def test_up_to_six_hours_are_the_raw_samples(two_hours):
    series = gpu_series(gpus=[two_hours], start=T, end=T + timedelta(hours=1), now=T)
    assert series["source"] == "raw"
    assert len(_points(series)) == 241  # both ends included


def test_up_to_seven_days_are_minute_points_from_the_raw_samples_while_kept(two_hours):
    series = gpu_series(gpus=[two_hours], start=T - timedelta(hours=6), end=T + timedelta(hours=2),
                        now=T + timedelta(days=1))  # fmt: skip
    assert series["source"] == "minute"
    points = _points(series)
    assert len(points) == 120
    assert points[0] == (T, 20.0) and points[-1] == (T + timedelta(minutes=119), 60.0)


def test_past_the_raw_retention_they_are_hourly_points_and_say_so(two_hours):
    series = gpu_series(gpus=[two_hours], start=T - timedelta(hours=6), end=T + timedelta(hours=2),
                        now=T + timedelta(days=30))  # fmt: skip
    assert series["source"] == "hour"
    assert _points(series) == [(T, 20.0), (T + timedelta(hours=1), 60.0)]
    (gpu,) = series["gpus"]
    assert gpu["points"][0]["power"] == 100.0
