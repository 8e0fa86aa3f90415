"""A node's stored GPU count is kept by the database through every way GPUs change."""

import threading

import pytest
from django.db import connections, transaction

from catalog.models import Gpu, Node
from tests.support.factories.catalog import NodeFactory


def _stored(*nodes):
    return [Node.objects.get(pk=node.pk).gpu_count for node in nodes]


@pytest.mark.django_db
def test_the_count_follows_gpus_added_removed_and_moved():
    a, b = NodeFactory(gpus=8), NodeFactory(gpus=4)
    assert _stored(a, b) == [8, 4]
    Gpu.objects.filter(node=a, index__gte=6).delete()
    assert _stored(a, b) == [6, 4]
    Gpu.objects.filter(node=a, index=5).update(node=b, index=4)
    assert _stored(a, b) == [5, 5]
    Gpu.objects.create(node=a, index=7, uuid="GPU-extra")
    assert _stored(a, b) == [6, 5]


@pytest.mark.django_db
def test_saving_a_stale_copy_of_the_node_keeps_the_true_count():
    node = NodeFactory(gpus=0)
    Gpu.objects.bulk_create(Gpu(node=node, index=i, uuid=f"GPU-late-{i}") for i in range(3))
    assert node.gpu_count == 0  # the copy in memory is stale
    node.health_detail = "edited"
    node.save()
    assert _stored(node) == [3]


@pytest.mark.django_db(transaction=True)
def test_two_transactions_adding_gpus_to_one_node_count_both():
    node = NodeFactory(gpus=0)
    barrier = threading.Barrier(2)

    def add(first_index):
        try:
            with transaction.atomic():
                barrier.wait(10)
                Gpu.objects.bulk_create(
                    Gpu(node_id=node.pk, index=i, uuid=f"GPU-race-{i}")
                    for i in range(first_index, first_index + 4)
                )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=add, args=(i,)) for i in (0, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _stored(node) == [8]
