"""Polling against the simulator on loopback: every failure mode marks only its own node."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import ExporterKind, NodeHealth
from rentals.services import allocation_stop, gpu_activity_flags_update
from telemetry.models import Flag, FleetRollup, GpuDay, GpuHour, GpuSample, Poll
from telemetry.poll import nodes_mark_stale, poll_nodes
from telemetry.rollup import telemetry_prune, telemetry_rollup
from tests.support.booking import book
from tests.support.factories.catalog import NodeFactory
from tests.telemetry.conftest import point_at

pytestmark = pytest.mark.django_db


FAULTS = {
    "timeout": NodeHealth.UNREACHABLE,
    "500": NodeHealth.UNREACHABLE,
    "reset": NodeHealth.UNREACHABLE,
    "empty": NodeHealth.DEGRADED,
    "html": NodeHealth.MALFORMED,
    "garbage": NodeHealth.MALFORMED,
    "truncated": NodeHealth.MALFORMED,
    "gpu-gone": NodeHealth.DEGRADED,
}


def test_every_fault_marks_only_its_node(catalog, simulator, fast_polls):
    healthy = NodeFactory(gpu_model=catalog.h100, gpus=8)
    amd = NodeFactory(gpu_model=catalog.mi300x, exporter=ExporterKind.AMD, gpus=8)
    faulty = {mode: NodeFactory(gpu_model=catalog.h100, gpus=2) for mode in FAULTS}
    point_at(simulator, [healthy, amd, *faulty.values()])
    for mode, node in faulty.items():
        simulator.set_fault(node.hostname, mode, gpu=1)

    started = time.monotonic()
    result = poll_nodes([healthy.pk, amd.pk, *[n.pk for n in faulty.values()]])
    elapsed = time.monotonic() - started

    assert elapsed < 6.0  # the node hanging 10 s costs its 1 s read timeout, not everyone's
    assert result["nodes"] == 2 + len(FAULTS)
    for node in [healthy, amd, *faulty.values()]:
        node.refresh_from_db()
    assert healthy.health == amd.health == NodeHealth.HEALTHY
    assert {mode: node.health for mode, node in faulty.items()} == FAULTS
    assert "fallen off the bus" in faulty["gpu-gone"].health_detail
    assert GpuSample.objects.filter(gpu__node=healthy).count() == 8
    assert GpuSample.objects.filter(gpu__node=amd).count() == 8
    assert GpuSample.objects.filter(gpu__node=faulty["gpu-gone"]).count() == 1
    assert GpuSample.objects.filter(gpu__node=faulty["html"]).count() == 0
    assert Flag.objects.filter(kind="gpu_missing", gpu__node=faulty["gpu-gone"]).count() == 1
    assert Poll.objects.filter(outcome="malformed").count() == 3


def test_oversized_body_is_refused(catalog, simulator, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "POLL_MAX_BYTES": 2000}
    node = NodeFactory(gpu_model=catalog.h100, gpus=8)
    point_at(simulator, [node])
    poll_nodes([node.pk])
    node.refresh_from_db()
    assert node.health == NodeHealth.UNREACHABLE
    assert "larger than 2000 bytes" in node.health_detail
    assert GpuSample.objects.count() == 0


def test_samples_follow_allocation_state_and_flags_open_and_close(
    catalog, alice, simulator, fast_polls
):
    allocation = book(alice, model="l4", count=1, period="day")
    held_gpu = allocation.held.get().gpu
    l4 = allocation.node
    free_gpu = l4.gpus.exclude(pk=held_gpu.pk).first()
    allocation_stop(acting=acting_as(alice), allocation=allocation)
    point_at(simulator, [l4], {held_gpu.uuid: "running", free_gpu.uuid: "running"})

    poll_nodes([l4.pk])
    gpu_activity_flags_update()

    open_flags = set(Flag.objects.filter(closed_at__isnull=True).values_list("gpu_id", "kind"))
    assert open_flags == {
        (held_gpu.pk, "stopped_active"),
        (free_gpu.pk, "unallocated_active"),
    }
    poll_nodes([l4.pk])
    gpu_activity_flags_update()
    assert Flag.objects.count() == 2  # a condition that holds opens its flag once

    point_at(simulator, [l4])
    poll_nodes([l4.pk])
    gpu_activity_flags_update()
    assert Flag.objects.filter(closed_at__isnull=True).count() == 0
    sample = GpuSample.objects.filter(gpu=held_gpu).latest("at")
    assert sample.utilization == 0 and sample.memory_total_mib == l4.gpu_model.memory_reported_mib


def test_stale_after_n_intervals_without_a_good_poll(catalog, simulator, fast_polls):
    node = NodeFactory(gpu_model=catalog.h100, gpus=1)
    point_at(simulator, [node])
    poll_nodes([node.pk])
    simulator.set_fault(node.hostname, "500")
    poll_nodes([node.pk], now=timezone.now() + timedelta(seconds=20))
    node.refresh_from_db()
    assert node.health == NodeHealth.UNREACHABLE
    later = timezone.now() + timedelta(seconds=75)
    poll_nodes([node.pk], now=later)
    node.refresh_from_db()
    assert node.health == NodeHealth.STALE
    # A node nobody polled is stale once the console has been polling for that long.
    other = NodeFactory(gpu_model=catalog.h100, gpus=1, health=NodeHealth.HEALTHY)
    other.last_good_poll_at = timezone.now() - timedelta(minutes=5)
    other.save()
    assert nodes_mark_stale(now=later) >= 1
    other.refresh_from_db()
    assert other.health == NodeHealth.STALE


def test_rollups_per_minute_and_hour_are_idempotent_and_pruned(catalog):
    gpu = catalog.nodes[0].gpus.first()
    base = datetime(2026, 1, 10, 10, 0, tzinfo=UTC)
    GpuSample.objects.bulk_create(
        GpuSample(gpu=gpu, at=base + timedelta(seconds=15 * i), utilization=float(i % 4 * 10),
                  memory_used_mib=100.0 + i, energy_j=1000.0 + i * 10)
        for i in range(8)  # two minutes, four samples each
    )  # fmt: skip

    telemetry_rollup(now=base + timedelta(hours=1, minutes=5))
    telemetry_rollup(now=base + timedelta(hours=1, minutes=5))

    # The fleet's minutes (one GPU here): intervals between consecutive samples, each in
    # its later sample's minute, so nothing is lost at the minute's edge and the buckets
    # add up to the counter's whole rise.
    minutes = list(FleetRollup.objects.filter(bucket="minute").order_by("at"))
    assert [(m.samples, m.util_sum / m.util_samples) for m in minutes] == [(4, 15.0), (4, 15.0)]
    assert [(m.energy_j, m.covered_s, m.busy_s) for m in minutes] == [
        (30.0, 45.0, 45.0),
        (40.0, 60.0, 45.0),  # the edge interval ends on a 0 % sample: covered, not busy
    ]
    hour = GpuHour.objects.get()
    assert (hour.samples, hour.util_avg, hour.util_max, hour.mem_max_mib, hour.energy_j) == (
        8, 15.0, 30.0, 107.0, 1070.0 - 1000.0,
    )  # fmt: skip
    assert not GpuDay.objects.exists()  # the day is not over yet
    telemetry_rollup(now=base + timedelta(days=1))
    day = GpuDay.objects.get()
    assert (day.at, day.samples, day.util_avg) == (base.replace(hour=0), 8, 15.0)

    assert telemetry_prune(now=base + timedelta(days=8))["samples"] == 8
    assert (GpuHour.objects.count(), GpuDay.objects.count()) == (1, 1)
    # January 2026 has no month partition here: its rows are deleted from the default one.
    assert telemetry_prune(now=base + timedelta(days=401))["rollups"] == 2
    assert not GpuHour.objects.exists() and not GpuDay.objects.exists()


def test_telemetry_probe_prints_values_and_problems(catalog, simulator, capsys):
    node = NodeFactory(gpu_model=catalog.h100, gpus=2)
    point_at(simulator, [node])
    call_command("telemetry_probe", simulator.url_for(node.hostname))
    out = capsys.readouterr().out
    assert f'"key": "GPU-{node.hostname}-0"' in out and '"utilization": 0.0' in out

    simulator.set_fault(node.hostname, "html")
    with pytest.raises(Exception, match="unusable"):
        call_command("telemetry_probe", simulator.url_for(node.hostname))


def test_amd_exporter_without_serials_maps_gpus_by_index(catalog, simulator, fast_polls):
    node = NodeFactory(gpu_model=catalog.mi300x, exporter=ExporterKind.AMD, gpus=4)
    point_at(simulator, [node])
    simulator.set_fault(node.hostname, "no-serials")
    poll_nodes([node.pk])
    node.refresh_from_db()
    assert node.health == NodeHealth.HEALTHY, node.health_detail
    assert GpuSample.objects.filter(gpu__node=node).count() == 4


def test_a_poll_keeps_the_exporters_driver_label_and_staff_see_a_disagreement(
    catalog, simulator, fast_polls
):
    from catalog.services import node_software_record
    from catalog.software import node_driver_disagrees

    node = NodeFactory(gpu_model=catalog.h100, gpus=2)
    node_software_record(
        node_id=node.pk, report={"vendor": "nvidia", "driver": "580.65.06", "cuda": "13.0"},
        at=timezone.now(),
    )  # fmt: skip
    point_at(simulator, [node])
    simulator.state["nodes"][node.hostname].driver = "570.124.06"  # not what the agent said
    poll_nodes([node.pk])
    node.refresh_from_db()
    assert node.exporter_driver_version == "570.124.06" and node.driver_version == "580.65.06"
    assert node_driver_disagrees(node)
    simulator.state["nodes"][node.hostname].driver = "580.65.06"
    poll_nodes([node.pk])
    node.refresh_from_db()
    assert node.exporter_driver_version == "580.65.06" and not node_driver_disagrees(node)
