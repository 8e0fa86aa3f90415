"""The per model and region rollups give the dashboard the figures the per-GPU reads give."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from catalog.models import Gpu
from telemetry.models import FleetRollup, GpuDay, GpuHour
from telemetry.rollup import fleet_rollups_refresh, telemetry_rollup
from telemetry.selectors import (
    busy_gpus,
    fleet_busy_by_bucket,
    fleet_totals_by_group,
    gpu_totals_by_gpu,
)
from tests.support.rollups import samples_write

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture
def rolled(catalog):
    samples_write(T0, 26)  # a sample every 2 minutes for 26 hours; one counter resets
    counts = telemetry_rollup(now=T0 + 26 * HOUR)
    assert counts["fleet_hour"] > 0 and counts["fleet_day"] > 0
    return counts


def _group_per_gpu(per_gpu):
    where = {
        pk: (model_id, region_id)
        for pk, model_id, region_id in Gpu.objects.values_list(
            "pk", "node__gpu_model_id", "node__region_id"
        )
    }
    grouped = defaultdict(lambda: defaultdict(float))
    for gpu_id, totals in per_gpu.items():
        row = grouped[where[gpu_id]]
        for field in ("samples", "util_sum", "util_samples", "energy_j", "covered_s", "busy_s"):
            row[field] += getattr(totals, field) or 0
    return grouped


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (T0 + timedelta(minutes=90, seconds=20), T0 + 25 * HOUR + timedelta(minutes=10)),
        (T0, T0 + 26 * HOUR),  # a whole day from the day rollup, then hours
        (T0 + 3 * HOUR, T0 + 4 * HOUR),  # one hour
    ],
)
def test_per_group_totals_equal_the_per_gpu_totals_summed(rolled, start, end):
    expected = _group_per_gpu(gpu_totals_by_gpu(start=start, end=end))
    got = fleet_totals_by_group(start=start, end=end)
    assert set(got) == set(expected)
    for group, totals in got.items():
        for field, value in expected[group].items():
            assert (getattr(totals, field) or 0) == pytest.approx(value, rel=1e-9), (group, field)


def test_busy_gpus_per_bucket_count_the_gpus_over_the_threshold(rolled):
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    for bucket, model, end in (("hour", GpuHour, T0 + 26 * HOUR), ("day", GpuDay, T0 + 2 * 24 * HOUR)):  # fmt: skip
        expected = defaultdict(int)
        for row in model.objects.all():
            if row.util_avg is not None and row.util_avg > threshold:
                expected[row.at] += 1
        got = fleet_busy_by_bucket(bucket=bucket, start=T0, end=end)
        assert {at: n for at, n in got.items() if n} == dict(expected)
        assert len(got) == model.objects.values("at").distinct().count()


def test_a_refresh_rewrites_the_newest_bucket_and_is_idempotent(rolled):
    before = list(FleetRollup.objects.order_by("bucket", "at", "gpu_model", "region").values())
    for row in before:
        row.pop("id")
    # a GPU hour of the newest hour changes (late samples): the refresh picks it up
    newest = GpuHour.objects.order_by("-at", "gpu_id").first()
    GpuHour.objects.filter(pk=newest.pk).update(samples=newest.samples + 10)
    fleet_rollups_refresh(written_hour=newest.at)
    again = list(FleetRollup.objects.order_by("bucket", "at", "gpu_model", "region").values())
    for row in again:
        row.pop("id")
    changed = [(a, b) for a, b in zip(before, again, strict=True) if a != b]
    assert len(changed) == 1
    (old, new) = changed[0]
    assert (new["bucket"], new["at"]) == ("hour", newest.at)
    assert new["samples"] == old["samples"] + 10


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (T0 + timedelta(minutes=90, seconds=20), T0 + 25 * HOUR + timedelta(minutes=10)),
        (T0 + 25 * HOUR + timedelta(minutes=10, seconds=20), T0 + 26 * HOUR),  # raw
    ],
)
def test_the_busy_count_in_sql_equals_counting_the_per_gpu_totals(rolled, start, end, settings):
    per_gpu = gpu_totals_by_gpu(start=start, end=end)
    # the median GPU's average as the threshold: about half are busy, half not
    threshold = sorted(t.util_avg for t in per_gpu.values())[len(per_gpu) // 2]
    settings.ANCHORGPU = {**settings.ANCHORGPU, "ACTIVE_UTILISATION_PCT": threshold}
    expected = sum(1 for t in per_gpu.values() if (t.util_avg or 0) > threshold)
    assert 0 < expected < len(per_gpu)
    assert busy_gpus(start=start, end=end) == expected
