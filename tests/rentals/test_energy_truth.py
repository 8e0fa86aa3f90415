"""Figures you can bill on: energy from the counters' rise (resets included), whole-rental
summaries from rollups once raw samples are gone, and the dashboard's newest point live."""

from datetime import timedelta

import pytest
from django.utils import timezone

from rentals.models import Allocation
from rentals.models.edges import hour_ceil
from rentals.selectors.allocation_usage import allocation_usage
from rentals.services.edges import holding_edges_close
from reports.selectors import fleet_report
from telemetry.models import FleetRollup, GpuHour, GpuSample
from telemetry.poll import Fetched, store_polls
from telemetry.rollup import telemetry_prune, telemetry_rollup
from telemetry.simulator import EnergyMeter, SimGpu, SimNode, render_amd, render_dcgm
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def _raw_rise(gpu_ids):
    """The counters' rise from the raw samples, counted by hand: a drop is a reset."""
    rise = 0.0
    for gpu_id in gpu_ids:
        values = GpuSample.objects.filter(gpu_id=gpu_id).order_by("at")
        before = None
        for energy in values.values_list("energy_j", flat=True):
            if before is not None:
                rise += energy - before if energy >= before else energy
            before = energy
    return rise


@pytest.mark.parametrize(("exporter", "render"), [("dcgm", render_dcgm), ("amd", render_amd)])
def test_a_simulated_day_with_a_counter_reset_bills_the_energy_drawn(
    catalog, alice, exporter, render
):
    allocation = book(alice, model="l4", count=2, period="day")
    node = allocation.node
    node.exporter = exporter
    node.save(update_fields=["exporter"])
    gpus = [held.gpu for held in allocation.held.select_related("gpu")]
    sim = SimNode(
        node.hostname, exporter, "NVIDIA L4", 23034,
        [SimGpu(g.index, g.uuid, "running") for g in gpus],
    )  # fmt: skip
    meter = EnergyMeter()
    start, step = allocation.paid_from, 120
    for t in range(0, 86400, step):
        if t == 43200:  # midday: the node reboots and its counters start from zero
            for g in gpus:
                meter.reset(g.uuid)
        body = render(sim, start.timestamp() + t, meter=meter)
        store_polls(
            {node.pk: node}, {node.pk: gpus}, [Fetched(node.pk, 0.0, 5, body=body)],
            now=start + timedelta(seconds=t),
        )  # fmt: skip
    end = allocation.paid_until
    telemetry_rollup(now=end + timedelta(hours=1))

    drawn = sum(meter.used_j[g.uuid] for g in gpus)  # the truth: power × time
    assert drawn > 2 * 400 * 86400 * 0.8  # two busy L4s for a day
    usage = allocation_usage(allocation=Allocation.objects.get(), now=end)
    assert usage["energy_kwh"] * 3.6e6 == pytest.approx(drawn, rel=0.005)

    ids = [g.pk for g in gpus]
    raw = _raw_rise(ids)
    hours = GpuHour.objects.filter(gpu_id__in=ids)
    minutes = FleetRollup.objects.filter(bucket="minute")  # the node's GPUs are the only ones
    assert sum(h.energy_j or 0 for h in hours) == pytest.approx(raw, rel=1e-9)
    assert sum(m.energy_j or 0 for m in minutes) == pytest.approx(raw, rel=1e-9)
    assert usage["busy_hours"] == pytest.approx(2 * 24, abs=0.1)


@pytest.mark.parametrize("edges_kept", [True, False])
def test_a_30_day_rental_is_summed_over_all_30_days_after_raw_samples_are_pruned(
    catalog, alice, settings, edges_kept
):
    """The whole hours from GPU hours, the partial first hour from the edge kept when it
    closed; without that edge, the figures leave the part out and say so."""
    allocation = book(alice, model="l4", count=1, period="month")
    gpu = allocation.held.get().gpu
    start, step = allocation.paid_from, timedelta(minutes=5)
    count = int(timedelta(days=30) / step)
    GpuSample.objects.bulk_create(
        GpuSample(
            gpu=gpu, at=start + i * step, utilization=90.0 if i % 2 else 50.0,
            memory_used_mib=1000.0 + (i == 5000) * 20000, energy_j=1e6 + i * 300 * 400.0,
        )
        for i in range(count)
    )  # fmt: skip
    end = allocation.paid_until
    # Beat's runs: the rollup, then the edges of the hours it closed (the first one here).
    telemetry_rollup(now=start + timedelta(hours=2))
    if edges_kept:
        assert holding_edges_close() == 1
        assert holding_edges_close() == 0  # kept once
    telemetry_rollup(now=end)
    pruned = telemetry_prune(now=end)  # older than 7 days: gone, whole days dropped
    assert pruned["partitions_dropped"] > 0 and pruned["samples"] > 0
    kept = sum(1 for i in range(count) if start + i * step >= end - timedelta(days=7))
    assert GpuSample.objects.count() == kept

    usage = allocation_usage(allocation=Allocation.objects.get(), now=end)
    assert usage["paid_hours"] == 720.0
    first = (hour_ceil(start) - start).total_seconds() / 3600  # the partial first hour
    if not edges_kept:  # its raw samples pruned: left out, and said
        assert usage["edges_unsplit"]
        assert usage["covered_gpu_hours"] == pytest.approx(720 - first, abs=0.2)
        return
    assert not usage["edges_unsplit"]
    assert usage["covered_gpu_hours"] == pytest.approx(720, abs=0.2)
    assert not usage["partial"]
    assert usage["busy_hours"] == pytest.approx(720, abs=0.2)
    assert usage["util_avg"] == pytest.approx(70.0, abs=0.01)
    assert usage["mem_max_mib"] == 21000.0  # a peak in the first week, long pruned
    assert usage["energy_kwh"] == pytest.approx((count - 1) * 300 * 400 / 3.6e6, abs=0.001)


def test_the_newest_dashboard_point_is_live(catalog, alice):
    """The hour not closed yet is on the chart, read up to the newest minute rolled up: the
    minute before `now`'s, after the run at `now` (the beat's, every minute)."""
    allocation = book(alice, model="h100", count=2)
    now = timezone.now()
    if now.minute < 2:  # the minute before is in this hour
        now += timedelta(minutes=2)
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    GpuSample.objects.bulk_create(
        GpuSample(gpu=held.gpu, at=minute + timedelta(seconds=s), utilization=u)
        for held in allocation.held.all()
        for s, u in ((10, 0.0), (40, 0.0))
    )
    telemetry_rollup(now=now)
    latest = fleet_report(now=now)["over_time"][-1]
    assert (
        latest["busy"] == 0 and latest["busy_until"] == (minute + timedelta(minutes=1)).isoformat()
    )
    GpuSample.objects.bulk_create(
        GpuSample(gpu=held.gpu, at=minute + timedelta(seconds=55), utilization=95.0)
        for held in allocation.held.all()
    )
    assert fleet_report(now=now)["over_time"][-1]["busy"] == 0  # not rolled up yet
    telemetry_rollup(now=now)  # the late samples rewrite the minute
    latest = fleet_report(now=now)["over_time"][-1]
    assert latest["busy"] == 2 and latest["allocated"] == 2
