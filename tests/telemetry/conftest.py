"""A node simulator on loopback serving real exporter text, and polls that fail fast."""

import pytest

from telemetry.simulator import SimGpu, SimNode, Simulator


def sim_nodes(nodes, states=None):
    states = states or {}
    return {
        node.hostname: SimNode(
            hostname=node.hostname,
            exporter=node.exporter,
            model_name=node.gpu_model.name,
            memory_mib=node.gpu_model.memory_reported_mib,
            gpus=[SimGpu(g.index, g.uuid, states.get(g.uuid, "free")) for g in node.gpus.all()],
        )
        for node in nodes
    }


@pytest.fixture
def fast_polls(settings):
    settings.ANCHORGPU = {
        **settings.ANCHORGPU,
        "POLL_CONNECT_TIMEOUT": 0.5,
        "POLL_READ_TIMEOUT": 1.0,
        "POLL_INTERVAL": 15.0,
    }


@pytest.fixture
def simulator():
    state = {"nodes": {}}
    sim = Simulator(lambda: state["nodes"], refresh=0.0, hang_seconds=10.0).start_in_thread()
    sim.state = state
    yield sim
    sim.stop()


def point_at(sim, nodes, states=None):
    sim.state["nodes"] = sim_nodes(nodes, states)
    for node in nodes:
        node.telemetry_url = sim.url_for(node.hostname)
        node.save(update_fields=["telemetry_url"])


def watching(*, since, now, nodes=None):
    """The console has polled these nodes (all active ones) without a gap from `since` to
    `now`: what staleness is judged from (Node.polled_since)."""
    from catalog.models import Node, NodeState

    rows = Node.objects.filter(state=NodeState.ACTIVE)
    if nodes is not None:
        rows = rows.filter(pk__in=[n.pk for n in nodes])
    rows.update(last_poll_at=now, polled_since=since)
