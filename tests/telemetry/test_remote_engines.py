"""The operator's engine as the telemetry source, against real engines on loopback: Debian's
Prometheus and VictoriaMetrics (`make engines`) scrape the node simulator through our SD
endpoint, and AnchorGPU reads them (telemetry/remote.py).

- The same samples give the same per-minute figures as the embedded poller: the bodies the
  simulator served each engine are stored through the embedded path at the engine's own
  timestamps, and both sets of minute rollups must be equal, exactly for energy, in a
  minute with a counter reset too, for each engine.
- Every simulator fault gives the embedded poller's node health and flags, or the
  documented difference (VictoriaMetrics keeps what it could read of a bad body).
- A two-minute outage of the engine marks no node, flags the engine, and once it answers
  the minutes are ingested with nothing lost or doubled.

These start servers of their own and wait for real scrapes: `slow` (make test runs them
beside the parallel pass).
"""

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.urls import reverse

from catalog.models import ExporterKind, Node, NodeHealth
from telemetry.models import Flag, FlagKind, GpuRollup, GpuSample, IngestMark, Poll
from telemetry.parse import parse_exporter
from telemetry.poll import Fetched, poll_nodes, store_polls
from telemetry.promapi import Engine, ms_of
from telemetry.remote import Shard, remote_poll_nodes, telemetry_ingest
from telemetry.rollup import telemetry_rollup
from telemetry.tasks import nodes_poll_task
from tests.catalog.factories import NodeFactory
from tests.telemetry import engines
from tests.telemetry.conftest import point_at

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MINUTE = timedelta(minutes=1)
ROLLUP_FIELDS = (
    "gpu__uuid", "at", "samples", "utilization_avg", "utilization_max", "memory_used_max_mib",
    "memory_total_mib", "power_avg_w", "temperature_max_c", "energy_j", "covered_s", "busy_s",
)  # fmt: skip


@pytest.fixture
def source(settings, live_server):
    """TELEMETRY_SOURCE=prometheus with the SD secret, reading `use(engine)`'s engine."""
    conf = {
        **settings.ANCHORGPU["PROMETHEUS"],
        "SD_TOKEN": engines.SD_TOKEN,
        "LAG": 2.0,
        "TIMEOUT": 3.0,
        "LIVE_WINDOW": 2.0 * engines.SCRAPE_INTERVAL_S,
    }
    settings.ANCHORGPU = {
        **settings.ANCHORGPU, "TELEMETRY_SOURCE": "prometheus", "PROMETHEUS": conf,
        "POLL_CONNECT_TIMEOUT": 0.5, "POLL_READ_TIMEOUT": 1.0,
    }  # fmt: skip

    def use(engine, **more):
        settings.ANCHORGPU = {
            **settings.ANCHORGPU,
            "PROMETHEUS": {**settings.ANCHORGPU["PROMETHEUS"], "URL": engine.url, **more},
        }

    use.sd_url = live_server.url + reverse("api-prometheus-targets")
    return use


def _next_minute(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0) + MINUTE


def _sleep_until(at: datetime):
    time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()))


def _rollups(start, end):
    return sorted(
        GpuRollup.objects.filter(bucket="minute", at__gte=start, at__lt=end).values_list(
            *ROLLUP_FIELDS
        )
    )


def _clear_telemetry():
    GpuSample.objects.all().delete()
    GpuRollup.objects.all().delete()
    IngestMark.objects.all().delete()
    Poll.objects.all().delete()
    Flag.objects.all().delete()


def _embedded_from_bodies(nodes, served, engine_rows):
    """The bodies the engine scraped, stored through the embedded path (parse, map by UUID,
    COPY) at the engine's timestamps: each body is found by its first GPU's energy counter,
    which differs in every scrape."""
    by_counter = {}
    for node in nodes:
        first = node.gpus.order_by("index").first()
        for body in served[node.hostname]:
            reading = parse_exporter(body, exporter=node.exporter).readings.get(first.uuid)
            by_counter[(first.uuid, reading.energy_j)] = (node, body)
    gpus_by_node = {
        n.pk: [g for g in n.gpus.all().order_by("index")] for n in nodes
    }  # Gpu rows have pk, node_id, index and uuid, as PolledGpu
    stored = 0
    for uuid, at, energy in engine_rows:
        node, body = by_counter[(uuid, energy)]
        store_polls(
            {node.pk: node}, {node.pk: gpus_by_node[node.pk]},
            [Fetched(node.pk, 0.0, 1, body=body)], now=at,
        )  # fmt: skip
        stored += 1
    return stored


def _first_gpu_rows(nodes):
    firsts = [n.gpus.order_by("index").first().pk for n in nodes]
    return list(
        GpuSample.objects.filter(gpu_id__in=firsts)
        .order_by("at")
        .values_list("gpu__uuid", "at", "energy_j")
    )


def test_each_engine_gives_the_embedded_figures_for_the_same_samples(catalog, simulator, source):
    nodes = [
        NodeFactory(gpu_model=catalog.h100, gpus=2),
        NodeFactory(gpu_model=catalog.h100, gpus=2),  # its counters reset mid-window
        NodeFactory(gpu_model=catalog.mi300x, exporter=ExporterKind.AMD, gpus=2),
    ]
    point_at(simulator, nodes, {g.uuid: "running" for n in nodes for g in n.gpus.all()})
    served = simulator.record()
    hostnames = [n.hostname for n in nodes]
    ids = [n.pk for n in nodes]
    with (
        engines.prometheus(source.sd_url) as prom,
        engines.victoria_metrics(source.sd_url) as vm,
    ):
        for engine in (prom, vm):
            engines.wait_until(
                lambda e=engine: engines.targets_up(e, hostnames), timeout=40, what="targets up"
            )
        start = _next_minute(datetime.now(UTC) + timedelta(seconds=3))
        end = start + 3 * MINUTE
        _sleep_until(start + MINUTE + timedelta(seconds=25))
        simulator.set_fault(nodes[1].hostname, "counter-reset")
        _sleep_until(end + timedelta(seconds=3))
        vm.flush()
        figures = {}
        for engine in (prom, vm):
            source(engine, REPULL_MINUTES=3)
            _clear_telemetry()
            result = telemetry_ingest(ids, now=end + timedelta(seconds=2.5))
            assert (result["from"], result["until"]) == (start, end), result
            telemetry_rollup(now=end + MINUTE)
            remote = _rollups(start, end)
            engine_rows = _first_gpu_rows(nodes)
            remote_samples = GpuSample.objects.count()

            _clear_telemetry()
            assert _embedded_from_bodies(nodes, served, engine_rows) == len(engine_rows)
            telemetry_rollup(now=end + MINUTE)
            embedded = _rollups(start, end)
            figures[engine.name] = (remote, embedded, remote_samples)

    for name, (remote, embedded, samples) in figures.items():
        # 3 nodes × 2 GPUs × 3 minutes, about 12 scrapes a minute each
        assert len(remote) == 18, (name, len(remote))
        assert samples >= 6 * 3 * 10, (name, samples)
        assert remote == embedded, name  # every figure, energy exactly
        reset_gpu = nodes[1].gpus.order_by("index").first().uuid
        energy = [r[9] for r in remote if r[0] == reset_gpu]
        assert len(energy) == 3 and all(e > 0 for e in energy), (name, energy)
        # The minute of the reset counts the rise since the reset, not a negative one.
        assert energy[1] < energy[0] * 1.5, (name, energy)


FAULTS = ("500", "timeout", "empty", "html", "truncated", "gpu-gone", "counter-reset")


def _judgement(nodes):
    """Each node's health, and the open flags as (hostname, GPU index, kind)."""
    health = {n.hostname: Node.objects.get(pk=n.pk).health for n in nodes}
    flags = sorted(
        (f.node.hostname, f.gpu.index if f.gpu else None, f.kind)
        for f in Flag.objects.filter(closed_at__isnull=True, node__isnull=False)
    )
    return health, flags


def _judgement_forgotten(nodes):
    Flag.objects.all().delete()
    Poll.objects.all().delete()
    GpuSample.objects.all().delete()
    Node.objects.filter(pk__in=[n.pk for n in nodes]).update(
        health=NodeHealth.UNKNOWN, health_detail="", last_poll_at=None, last_good_poll_at=None
    )


def test_each_fault_gives_the_embedded_health_and_flags_or_the_documented_difference(
    catalog, simulator, source
):
    healthy = NodeFactory(gpu_model=catalog.h100, gpus=2)
    faulty = {mode: NodeFactory(gpu_model=catalog.h100, gpus=2) for mode in FAULTS}
    nodes = [healthy, *faulty.values()]
    ids = [n.pk for n in nodes]
    point_at(simulator, nodes)
    with (
        engines.prometheus(source.sd_url) as prom,
        engines.victoria_metrics(source.sd_url) as vm,
    ):
        for engine in (prom, vm):
            engines.wait_until(
                lambda e=engine: engines.targets_up(e, [n.hostname for n in nodes]),
                timeout=40, what=f"{engine.name}'s targets up",
            )  # fmt: skip
        for mode, node in faulty.items():
            simulator.set_fault(node.hostname, mode, gpu=1)
        time.sleep(2 * engines.SCRAPE_INTERVAL_S + 3)  # every target scraped with its fault
        vm.flush()

        poll_nodes(ids)
        embedded = _judgement(nodes)
        seen = {}
        for engine in (prom, vm):
            _judgement_forgotten(nodes)
            source(engine)
            result = remote_poll_nodes(ids)
            assert result["nodes"] == len(nodes), (engine.name, result)
            assert result["samples"] > 0
            seen[engine.name] = _judgement(nodes)
            details = dict(Node.objects.filter(pk__in=ids).values_list("hostname", "health_detail"))
            seen[engine.name] += (details,)

    health, flags = embedded
    host = {mode: node.hostname for mode, node in faulty.items()}
    assert health == {
        healthy.hostname: NodeHealth.HEALTHY,
        host["500"]: NodeHealth.UNREACHABLE,
        host["timeout"]: NodeHealth.UNREACHABLE,
        host["empty"]: NodeHealth.DEGRADED,
        host["html"]: NodeHealth.MALFORMED,
        host["truncated"]: NodeHealth.MALFORMED,
        host["gpu-gone"]: NodeHealth.DEGRADED,
        host["counter-reset"]: NodeHealth.HEALTHY,
    }
    unreachable = FlagKind.NODE_UNREACHABLE
    assert flags == sorted(
        [(host[m], None, unreachable) for m in ("500", "timeout", "empty", "html", "truncated")]
        + [(host["gpu-gone"], 1, FlagKind.GPU_MISSING)]
    )
    # Prometheus rejects a bad scrape whole (up = 0, lastError): the poller's judgement.
    assert seen["prometheus"][:2] == embedded, seen["prometheus"]
    assert "could not read the exporter" in seen["prometheus"][2][host["html"]]
    # VictoriaMetrics keeps what it could read (up = 1): an HTML page is a scrape without
    # GPU families (degraded, no GPU readings), a truncated body a partial one (degraded,
    # the GPUs it lost missing). Everything else as the poller judges it.
    vm_health, vm_flags, vm_details = seen["victoria-metrics"]
    assert vm_health == {
        **health,
        host["html"]: NodeHealth.DEGRADED,
        host["truncated"]: NodeHealth.DEGRADED,
    }
    assert "without GPU families" in vm_details[host["html"]]
    differ = {host["truncated"]}
    assert [f for f in vm_flags if f[0] not in differ] == [f for f in flags if f[0] not in differ]
    assert vm_details[host["truncated"]].startswith(("missing GPUs", "the engine kept part"))


def _engine_has_samples_since(shard: Shard, since: datetime) -> bool:
    try:
        with Engine() as engine:
            found = engine.samples(shard.selector(), start=since, end=datetime.now(UTC))
    except Exception:  # noqa: BLE001 (not up yet)
        return False
    return bool(found)


def _exported_energy(vm, start, end) -> set:
    """The engine's own raw energy samples in [start, end), read by its export API."""
    response = httpx.get(
        f"{vm.url}/api/v1/export",
        params={
            "match[]": '{__name__="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}',
            "start": ms_of(start) / 1000,
            "end": (ms_of(end) - 1) / 1000,
        },  # fmt: skip
        timeout=30,
    )
    rows = set()
    for line in response.text.splitlines():
        item = json.loads(line)
        for ms, value in zip(item["timestamps"], item["values"], strict=True):
            if ms_of(start) <= ms < ms_of(end):
                rows.add((item["metric"]["UUID"], ms, float(value) * 1e-3))
    return rows


def test_an_engine_outage_marks_no_node_and_its_minutes_are_ingested_after(
    catalog, simulator, source
):
    nodes = [NodeFactory(gpu_model=catalog.h100, gpus=2) for _ in range(2)]
    point_at(simulator, nodes, {g.uuid: "running" for n in nodes for g in n.gpus.all()})
    ids = [n.pk for n in nodes]
    shard = Shard.load(ids)
    # An operator's agent scrapes through our SD endpoint and writes to VictoriaMetrics,
    # buffering while it is down; AnchorGPU reads VictoriaMetrics.
    with (
        engines.victoria_metrics(None) as vm,
        engines.vmagent(source.sd_url, vm.url),
    ):
        source(vm, REPULL_MINUTES=2)
        engines.wait_until(
            lambda: _engine_has_samples_since(shard, datetime.now(UTC) - timedelta(seconds=8)),
            timeout=60, what="samples in VictoriaMetrics",
        )  # fmt: skip
        start = _next_minute(datetime.now(UTC) + timedelta(seconds=3))
        _sleep_until(start + timedelta(seconds=20))
        vm.flush()
        assert remote_poll_nodes(ids)["nodes"] == 2
        assert telemetry_ingest(ids)["until"] == start
        before = {n.hostname: n.health for n in Node.objects.filter(pk__in=ids)}
        assert set(before.values()) == {NodeHealth.HEALTHY}

        vm.stop()
        outage_ends = datetime.now(UTC) + timedelta(minutes=2)
        rounds = 0
        while datetime.now(UTC) < outage_ends:
            remote_poll_nodes(ids)
            telemetry_ingest(ids)
            nodes_poll_task()  # marks nobody stale while the engine's flag is open
            rounds += 1
            assert {n.hostname: n.health for n in Node.objects.filter(pk__in=ids)} == before
            assert Flag.objects.filter(
                kind=FlagKind.ENGINE_UNREACHABLE, closed_at__isnull=True
            ).exists()
            time.sleep(15)
        assert rounds >= 6
        assert not Flag.objects.filter(node__isnull=False, closed_at__isnull=True).exists()
        assert set(IngestMark.objects.values_list("ingested_until", flat=True)) == {start}

        vm.restart()
        engines.wait_until(  # the agent's buffer reached it
            lambda: _engine_has_samples_since(shard, datetime.now(UTC) - timedelta(seconds=6)),
            timeout=120, what="the agent's buffered samples",
        )  # fmt: skip
        vm.flush()
        end = _next_minute(datetime.now(UTC)) - MINUTE
        _sleep_until(end + timedelta(seconds=3))
        vm.flush()
        while IngestMark.objects.filter(ingested_until__lt=end).exists():
            assert telemetry_ingest(ids).get("engine") is None
        remote_poll_nodes(ids)
        assert not Flag.objects.filter(closed_at__isnull=True).exists()  # the engine's closed
        assert Flag.objects.get(kind=FlagKind.ENGINE_UNREACHABLE).closed_at is not None
        exported = _exported_energy(vm, start, end)

    stored = list(
        GpuSample.objects.filter(at__gte=start, at__lt=end)
        .order_by("gpu_id", "at")
        .values_list("gpu__uuid", "at", "energy_j")
    )
    assert len(stored) == len(set((uuid, at) for uuid, at, _ in stored))  # nothing doubled
    assert {(uuid, ms_of(at), energy) for uuid, at, energy in stored} == exported  # nor lost
    minutes = (end - start) // MINUTE
    assert minutes >= 3
    per_gpu_minute = 60 // engines.SCRAPE_INTERVAL_S
    for gpu in [g for n in nodes for g in n.gpus.all()]:
        ats = [at for uuid, at, _ in stored if uuid == gpu.uuid]
        assert len(ats) >= minutes * per_gpu_minute - 2, (gpu.uuid, len(ats))
        gaps = [(b - a).total_seconds() for a, b in zip(ats, ats[1:], strict=False)]
        assert max(gaps) <= 2 * engines.SCRAPE_INTERVAL_S, gaps  # the outage's minutes too
