"""One hostile exporter costs its own node only: whatever it sends, the rest of the shard is
polled and stored, and nothing it sends reaches staff's screens verbatim."""

import time

import pytest
from django.utils import timezone

from catalog.models import NodeHealth
from telemetry.models import GpuSample, Poll
from telemetry.poll import Fetched, poll_nodes, store_polls
from telemetry.simulator import SimGpu, SimNode, gzip_bomb, render_dcgm
from tests.support.factories.catalog import NodeFactory
from tests.telemetry.conftest import point_at

pytestmark = pytest.mark.django_db


def _exporter_text(node) -> str:
    gpus = [SimGpu(g.index, g.uuid, "running") for g in node.gpus.all()]
    return render_dcgm(SimNode(node.hostname, "dcgm", node.gpu_model.name, 81559, gpus), 0.0)


def _store(nodes_and_bodies):
    nodes = {node.pk: node for node, _ in nodes_and_bodies}
    gpus = {node.pk: list(node.gpus.all()) for node, _ in nodes_and_bodies}
    fetched = [Fetched(node.pk, 0.0, 5, body=body) for node, body in nodes_and_bodies]
    return store_polls(nodes, gpus, fetched, now=timezone.now())


def test_hostile_values_cost_only_their_own_node(catalog):
    good, odd, nul, garbage = (NodeFactory(gpu_model=catalog.h100, gpus=2) for _ in range(4))
    odd_text = (
        _exporter_text(odd).replace('gpu="0"', 'gpu="²"').replace('err_msg="No Error"} 0', 'err_msg="No Error"} 4294967296')
    )  # fmt: skip
    uuid = odd.gpus.get(index=0).uuid
    nul_text = _exporter_text(nul) + 'DCGM_FI_DEV_GPU_TEMP{gpu="9",UUID="GPU-\x00x"} NaN\n'

    result = _store([
        (good, _exporter_text(good)),
        (odd, odd_text),
        (nul, nul_text),
        (garbage, "SECRET-BEARER-abc123 {{{ not exporter text\n"),
    ])  # fmt: skip

    assert result["nodes"] == 4
    for node in (good, odd, nul, garbage):
        node.refresh_from_db()
    assert good.health == NodeHealth.HEALTHY
    assert GpuSample.objects.filter(gpu__node=good).count() == 2
    # "²" is no GPU index and an XID past 2³¹ does not fit its column: both ignored, said so.
    assert odd.health == NodeHealth.HEALTHY
    assert GpuSample.objects.get(gpu__node=odd, gpu__uuid=uuid).xid is None
    assert "out of range" in odd.health_detail
    # A NUL the database cannot store: that node alone is marked malformed.
    assert nul.health == NodeHealth.MALFORMED
    assert GpuSample.objects.filter(gpu__node=nul).count() == 0
    assert garbage.health == NodeHealth.MALFORMED
    assert "SECRET" not in garbage.health_detail
    assert "SECRET" not in Poll.objects.get(node=garbage).error
    assert Poll.objects.count() == 4


def test_a_gzip_bomb_is_refused_by_its_size_on_the_wire(catalog, simulator, fast_polls):
    bomb, good = NodeFactory(gpu_model=catalog.h100, gpus=2), NodeFactory(gpu_model=catalog.h100)
    point_at(simulator, [bomb, good])
    simulator.set_fault(bomb.hostname, "gzip-bomb")
    gzip_bomb()  # compressed before the poll's clock runs: on a loaded machine it can take 1 s
    poll_nodes([bomb.pk, good.pk])
    bomb.refresh_from_db()
    good.refresh_from_db()
    assert bomb.health == NodeHealth.UNREACHABLE
    assert "compressed body (gzip) refused" in bomb.health_detail
    assert good.health == NodeHealth.HEALTHY


def test_a_trickling_exporter_is_cut_off_at_its_deadline(catalog, simulator, fast_polls, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "POLL_NODE_DEADLINE": 1.5}
    slow, good = NodeFactory(gpu_model=catalog.h100, gpus=2), NodeFactory(gpu_model=catalog.h100)
    point_at(simulator, [slow, good])
    simulator.set_fault(slow.hostname, "trickle")
    started = time.monotonic()
    poll_nodes([slow.pk, good.pk])
    assert time.monotonic() - started < 4.0  # each read is quick; the whole answer never is
    slow.refresh_from_db()
    good.refresh_from_db()
    assert slow.health == NodeHealth.UNREACHABLE
    assert "no complete answer within 1.5 s" in slow.health_detail
    assert good.health == NodeHealth.HEALTHY


def test_the_shard_deadline_records_what_arrived(catalog, simulator, fast_polls, settings):
    settings.ANCHORGPU = {
        **settings.ANCHORGPU, "POLL_NODE_DEADLINE": 30.0, "POLL_SHARD_DEADLINE": 1.0
    }  # fmt: skip
    slow, good = NodeFactory(gpu_model=catalog.h100, gpus=2), NodeFactory(gpu_model=catalog.h100)
    point_at(simulator, [slow, good])
    simulator.set_fault(slow.hostname, "trickle")
    poll_nodes([slow.pk, good.pk])
    slow.refresh_from_db()
    good.refresh_from_db()
    assert "deadline passed" in slow.health_detail and good.health == NodeHealth.HEALTHY
