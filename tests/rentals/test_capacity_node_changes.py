"""A node saved, changing state or deleted, or a GPU added to one, moves its model's
capacity version on once the change commits and queues a refresh: with a worker, the
summary follows within seconds. A save of other fields (health, polls) moves nothing."""

import pytest

from catalog.models import GpuModel, Node, NodeHealth, NodeState
from rentals.models import CapacityNode
from rentals.services.summary import capacity_summary_refresh, capacity_version
from tests.support.factories.catalog import GpuModelFactory, NodeFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_node_changes_move_their_models_capacity_version_on_commit(catalog):
    h100 = catalog.h100
    node = catalog.nodes[0]
    before = capacity_version(h100.pk)

    node.state = NodeState.MAINTENANCE
    node.save()
    assert capacity_version(h100.pk) == before + 1

    node.health = NodeHealth.DEGRADED
    node.save(update_fields=["health"])  # not capacity
    assert capacity_version(h100.pk) == before + 1

    node.state = NodeState.ACTIVE
    node.save(update_fields=["state"])
    assert capacity_version(h100.pk) == before + 2

    added = NodeFactory(gpu_model=h100, region=node.region, gpus=2)  # a save, then its GPUs
    assert capacity_version(h100.pk) == before + 3
    added.delete()
    assert capacity_version(h100.pk) >= before + 4


def test_a_node_moved_to_another_model_refreshes_both(catalog):
    h100 = catalog.h100
    other = GpuModelFactory()
    capacity_summary_refresh(gpu_model_id=h100.pk)  # the summary counts it under H100
    node = catalog.nodes[2]
    h100_before, other_before = capacity_version(h100.pk), capacity_version(other.pk)
    node.gpu_model = other
    node.save()
    assert capacity_version(h100.pk) == h100_before + 1
    assert capacity_version(other.pk) == other_before + 1


def test_with_a_worker_the_summary_follows_a_node_within_seconds(catalog, worker):
    h100 = GpuModel.objects.get(slug="h100")
    capacity_summary_refresh(gpu_model_id=h100.pk)
    node = Node.objects.get(pk=catalog.nodes[0].pk)
    assert CapacityNode.objects.filter(node=node).exists()

    node.state = NodeState.MAINTENANCE
    node.save()
    assert wait_for(lambda: not CapacityNode.objects.filter(node=node).exists(), timeout=10)

    added = NodeFactory(gpu_model=h100, region=node.region, gpus=8)
    assert wait_for(
        lambda: CapacityNode.objects.filter(node=added, gpus=8, free_now=8).exists(), timeout=10
    )
