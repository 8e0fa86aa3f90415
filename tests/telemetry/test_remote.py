"""The remote telemetry source's parts that need no engine running: the SD endpoint, what an
engine that cannot be read changes (nothing about the nodes), the ingest's window, replicas,
and rollups that start again where an ingest rewrote samples. The engines themselves are in
test_remote_engines.py."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.test import Client

from accounts.services.tokens import api_token_create
from anchorgpu.launcher import free_port
from catalog.models import ExporterKind, Node, NodeHealth, NodeState
from telemetry.models import (
    Flag,
    FlagKind,
    FleetRollup,
    GpuSample,
    IngestMark,
    Poll,
    SamplesRewritten,
)
from telemetry.parse import Family, Sample
from telemetry.promapi import Series, Target
from telemetry.remote import (
    Shard,
    failed_targets,
    ingest_window,
    partial_scrapes,
    remote_poll_nodes,
    scrapes_of,
    telemetry_ingest,
)
from telemetry.rollup import telemetry_rollup
from telemetry.tasks import nodes_poll_task
from tests.support.factories.catalog import NodeFactory

pytestmark = pytest.mark.django_db

SD = "/api/v1/prometheus/targets"
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


@pytest.fixture
def remote(settings):
    """TELEMETRY_SOURCE=prometheus, reading an address where nothing listens."""
    settings.ANCHORGPU = {
        **settings.ANCHORGPU,
        "TELEMETRY_SOURCE": "prometheus",
        "PROMETHEUS": {
            **settings.ANCHORGPU["PROMETHEUS"],
            "URL": f"http://127.0.0.1:{free_port()}",
            "TIMEOUT": 1.0,
            "SD_TOKEN": "the-sd-secret",
            "LAG": 30.0,
            "REPULL_MINUTES": 3,
            "CATCHUP_MINUTES": 30,
        },
    }
    return settings.ANCHORGPU["PROMETHEUS"]


def test_sd_lists_the_active_nodes_for_staff_or_the_secret(catalog, staff, alice, remote):
    node = NodeFactory(
        gpu_model=catalog.h100, gpus=2, telemetry_url="https://10.0.0.7:9400/metrics?x=1"
    )
    NodeFactory(gpu_model=catalog.h100, gpus=1, state=NodeState.MAINTENANCE)
    client = Client()

    assert client.get(SD).status_code == 401
    assert client.get(SD, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    customer = api_token_create(user=alice, name="sd")
    assert client.get(SD, HTTP_AUTHORIZATION=f"Bearer {customer}").status_code == 403

    by_secret = client.get(SD, HTTP_AUTHORIZATION="Bearer the-sd-secret")
    by_staff = client.get(SD, HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=staff, name='s')}")
    assert by_secret.status_code == by_staff.status_code == 200
    assert by_secret["Content-Type"] == "application/json"
    groups = {g["labels"]["anchorgpu_node"]: g for g in by_secret.json()}
    assert by_staff.json() == by_secret.json()
    active = {n.hostname for n in catalog.nodes if n.state == NodeState.ACTIVE} | {node.hostname}
    assert set(groups) == active  # the node in maintenance is not scraped
    assert groups[node.hostname] == {
        "targets": ["10.0.0.7:9400"],
        "labels": {
            "__metrics_path__": "/metrics",
            "__scheme__": "https",
            "__param_x": "1",
            "instance": node.hostname,
            "anchorgpu_node": node.hostname,
            "anchorgpu_model": catalog.h100.slug,
            "anchorgpu_region": node.region.slug,
        },
    }


def test_an_engine_that_cannot_be_read_marks_no_node(catalog, remote):
    node = NodeFactory(gpu_model=catalog.h100, gpus=2, health=NodeHealth.HEALTHY)
    node.last_good_poll_at = T0 - timedelta(minutes=30)  # long ago: stale, were it judged
    node.save()

    assert remote_poll_nodes([node.pk])["nodes"] == 0
    assert telemetry_ingest([node.pk])["samples"] == 0
    nodes_poll_task()  # in remote mode: nodes are not marked stale while the engine is down

    node.refresh_from_db()
    assert node.health == NodeHealth.HEALTHY
    flag = Flag.objects.get(closed_at__isnull=True)
    assert (flag.kind, flag.node_id, flag.gpu_id) == (FlagKind.ENGINE_UNREACHABLE, None, None)
    assert "ConnectError" in flag.detail
    assert not Poll.objects.exists() and not GpuSample.objects.exists()
    assert not IngestMark.objects.exists()  # nothing was ingested: the minutes wait

    remote_poll_nodes([node.pk])
    assert Flag.objects.count() == 1  # seen again, not opened twice


def test_the_metrics_say_the_engine_is_down(catalog, staff, remote):
    node = NodeFactory(gpu_model=catalog.h100, gpus=1)
    IngestMark.objects.create(node=node, ingested_until=datetime.now(UTC) - timedelta(minutes=5))
    remote_poll_nodes([node.pk])
    client = Client()
    text = client.get(
        "/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=staff, name='m')}"
    ).content.decode()
    assert "anchorgpu_telemetry_engine_up 0.0" in text
    lag = next(line for line in text.splitlines() if line.startswith("anchorgpu_telemetry_ingest"))
    assert 295 <= float(lag.split()[1]) <= 400
    assert 'anchorgpu_flags_open{kind="engine_unreachable",severity="critical"} 1.0' in text


def test_the_ingest_window(remote):
    now = T0 + timedelta(seconds=50)  # 30 s of lag: the last closed minute ends at 10:00
    # A new node: the last REPULL_MINUTES minutes.
    assert ingest_window({}, [1], now=now) == (T0 - timedelta(minutes=3), T0)
    # Steady: the marks are at the last closed minute, the last minutes are pulled again.
    assert ingest_window({1: T0}, [1], now=now + timedelta(minutes=1)) == (
        T0 - timedelta(minutes=2),
        T0 + timedelta(minutes=1),
    )
    # After an outage: from the earliest mark, at most CATCHUP_MINUTES at a time.
    behind = T0 - timedelta(hours=2)
    assert ingest_window({1: T0, 2: behind}, [1, 2], now=now) == (
        behind,
        behind + timedelta(minutes=30),
    )


def test_one_replica_per_node_and_a_sample_that_came_twice_is_one(catalog, settings, remote):
    settings.ANCHORGPU["PROMETHEUS"]["REPLICA_LABEL"] = "replica"
    node = NodeFactory(gpu_model=catalog.h100, gpus=1)
    shard = Shard.load([node.pk])
    uuid = node.gpus.get().uuid

    def series(replica, points, **more):
        labels = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "UUID": uuid, "gpu": "0",
                  "anchorgpu_node": node.hostname, "replica": replica, **more}  # fmt: skip
        return Series(labels, points)

    scrapes = scrapes_of(
        [
            series("b", [(1000, "40"), (6000, "41"), (11000, "42")]),
            series("a", [(2000, "50"), (7000, "51"), (12000, "52")]),
            series("a", [(2000, "50")], via="agent"),  # the same scrape, written twice
            series("c", [(3000, "60")]),  # a replica that missed scrapes
        ],
        shard,
    )
    assert sorted(ms for _node, ms in scrapes) == [2000, 7000, 12000]  # "a": ties go lowest
    assert len(scrapes[(node.pk, 2000)]["DCGM_FI_DEV_GPU_TEMP"].samples) == 2


def test_rollups_start_again_where_an_ingest_rewrote_samples(catalog):
    gpu = catalog.nodes[0].gpus.first()

    def samples(minute, utilization):
        GpuSample.objects.bulk_create(
            GpuSample(gpu=gpu, at=T0 + timedelta(minutes=minute, seconds=15 * i),
                      utilization=utilization, energy_j=1000.0 + 100 * minute + i)
            for i in range(4)
        )  # fmt: skip

    samples(0, 10.0)
    samples(1, 10.0)
    telemetry_rollup(now=T0 + timedelta(minutes=5))
    # An ingest replaces minute 0 (late data said otherwise) and says so.
    GpuSample.objects.filter(at__lt=T0 + timedelta(minutes=1)).delete()
    samples(0, 90.0)
    SamplesRewritten.objects.create(at=T0)
    telemetry_rollup(now=T0 + timedelta(minutes=5))

    minutes = {
        at: util_sum / samples
        for at, util_sum, samples in FleetRollup.objects.filter(bucket="minute").values_list(
            "at", "util_sum", "util_samples"
        )
    }
    assert minutes == {T0: 90.0, T0 + timedelta(minutes=1): 10.0}
    assert not SamplesRewritten.objects.exists()  # taken by the run


def test_amd_nodes_ask_for_their_prefixed_families(catalog, remote):
    amd = NodeFactory(
        gpu_model=catalog.mi300x, exporter=ExporterKind.AMD, gpus=1, metric_prefix="amd_"
    )
    selector = Shard.load([amd.pk]).selector()
    assert "amd_gpu_energy_consumed" in selector and "DCGM_FI" not in selector
    assert f'anchorgpu_node=~"{amd.hostname.replace("-", chr(92) * 2 + "-")}"' in selector


DCGM_READ = (
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
)  # fmt: skip


def _kept(names, gpus=("GPU-a", "GPU-b")) -> dict:
    """What an engine kept of one scrape: these families for these GPUs, and its `up`."""
    families = {n: Family(n, [Sample(n, {"UUID": g}, 1.0) for g in gpus]) for n in names}
    return families | {"up": Family("up", [Sample("up", {}, 1.0)])}


def test_a_scrape_cut_between_two_families_is_told_from_its_models_other_nodes():
    """VictoriaMetrics keeps what it could read of a truncated body. Cut inside a family,
    some GPUs have fewer series than their siblings; cut between two, every GPU lost the
    same families, which only the other nodes of the same model and exporter show. A family
    that only some exporter versions serve (FB_RESERVED) or another model's nodes lack is
    no loss."""
    nodes = {
        i: Node(pk=i, gpu_model_id=model, exporter=ExporterKind.DCGM, metric_prefix="")
        for i, model in ((1, 7), (2, 7), (3, 7), (4, 7), (5, 8))
    }
    partial = partial_scrapes(
        {
            1: _kept([*DCGM_READ, "DCGM_FI_DEV_FB_RESERVED"]),
            2: _kept(DCGM_READ[:2] + DCGM_READ[3:5]),  # no temperature, no memory
            3: _kept(DCGM_READ) | {"DCGM_FI_DEV_FB_FREE": Family(
                "DCGM_FI_DEV_FB_FREE", [Sample("DCGM_FI_DEV_FB_FREE", {"UUID": "GPU-a"}, 1.0)])},
            4: _kept(DCGM_READ),  # no FB_RESERVED: not every exporter serves it
            5: _kept(DCGM_READ[:1]),  # another model: nothing to compare with
        },
        nodes,
    )  # fmt: skip
    assert partial == {
        2: "the engine kept part of the last scrape: no DCGM_FI_DEV_FB_FREE, "
        "DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_GPU_TEMP, which other nodes of its model have",
        3: "the engine kept part of the last scrape: fewer series for GPU-b",
    }


class _TargetsApi:
    """The engine's targets API as `failed_targets` reads it: each call answers the targets
    as they stand then, and is counted."""

    def __init__(self, targets):
        self.now, self.calls = targets, 0

    def targets(self):
        self.calls += 1
        return self.now


def _target(host, health, error=""):
    return Target(
        labels={"anchorgpu_node": host}, health=health, last_error=error, last_scrape=None,
        duration_s=None,
    )  # fmt: skip


def test_the_targets_api_is_read_once_a_poll_interval_for_every_shard(remote, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "POLL_INTERVAL": 15.0}
    cache.clear()
    engine = _TargetsApi([_target("a", "down", "connection refused"), _target("b", "up")])
    now = datetime.now(UTC)
    failure = now - timedelta(seconds=20)

    first = failed_targets(engine, failure, now=now)
    for _shard in range(5):
        assert failed_targets(engine, failure, now=now) == first
    assert engine.calls == 1
    assert set(first) == {"a"} and first["a"].last_error == "connection refused"

    # A shard whose failed scrape is newer than the cached read reads again, and caches that.
    engine.now = [_target("a", "down", "connection refused"), _target("b", "down", "timeout")]
    fresher = failed_targets(engine, datetime.now(UTC) + timedelta(seconds=1), now=now)
    assert set(fresher) == {"a", "b"} and engine.calls == 2
    assert failed_targets(engine, failure, now=now) == fresher and engine.calls == 2

    # The next interval reads again.
    failed_targets(engine, failure, now=now + timedelta(seconds=15))
    assert engine.calls == 3
