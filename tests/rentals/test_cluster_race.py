"""Cluster races against real PostgreSQL: HTTP clients and threads, clusters and single
GPUs for the same nodes at once. Never a double sale, never a partial cluster."""

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connections

from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from rentals.errors import NoCapacity
from rentals.models import Allocation, AllocationGpu, Cluster, LedgerEntry
from rentals.services import allocation_book, quote_create
from tests.support.factories.accounts import UserFactory
from tests.support.factories.catalog import NodeFactory
from tests.support.races import overlapping_pairs

pytestmark = pytest.mark.django_db(transaction=True)


def race_group(catalog, nodes=8):
    return [
        NodeFactory(gpu_model=catalog.h100, region=catalog.nodes[0].region, gpus=8,
                    network_group="ib-race", fabric="InfiniBand NDR 400 Gb/s × 8")
        for _ in range(nodes)
    ]  # fmt: skip


def assert_whole_clusters():
    """Every cluster has all its nodes, each node wholly held, all in one group."""
    for cluster in Cluster.objects.all():
        members = Allocation.objects.filter(cluster=cluster).select_related("node")
        assert members.count() == cluster.node_count
        assert {m.node.network_group for m in members} == {cluster.network_group}
        for member in members:
            assert member.held.count() == member.node.gpus.count() == member.gpu_count
    assert overlapping_pairs() == 0


def test_24_http_clients_race_for_a_4_node_window(catalog, live_server):
    race_group(catalog, nodes=8)  # two disjoint 4-node sets
    users = UserFactory.create_batch(24)
    tokens = [api_token_create(user=u, name="race") for u in users]
    barrier = threading.Barrier(len(users))

    def attempt(i):
        headers = {"Authorization": f"Bearer {tokens[i]}"}
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=60) as client:
            quote = client.post(
                "/api/v1/quotes/",
                json={"gpu_model": "h100", "node_count": 4, "period": "day", "period_count": 1},
            )
            assert quote.status_code == 201, quote.text
            barrier.wait()
            response = client.post(
                "/api/v1/bookings/",
                json={"quote": quote.json()["id"]},
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            return response.status_code, response.json()

    with ThreadPoolExecutor(len(users)) as pool:
        results = list(pool.map(attempt, range(len(users))))

    statuses = Counter(status for status, _body in results)
    assert statuses == {201: 2, 409: 22}
    for status, body in results:
        if status == 409:
            assert body["code"] == "no_capacity" and body["earliest_start"], body
    won = [body for status, body in results if status == 201]
    node_sets = [frozenset(a["node"] for a in body["allocations"]) for body in won]
    assert all(len(nodes) == 4 for nodes in node_sets) and not node_sets[0] & node_sets[1]
    assert Cluster.objects.count() == 2 and Allocation.objects.count() == 8
    assert LedgerEntry.objects.count() == 2  # one charge per cluster
    assert_whole_clusters()


def test_clusters_and_single_gpus_race_for_the_same_nodes(catalog):
    group = race_group(catalog, nodes=8)
    users = UserFactory.create_batch(16)
    # 6 clusters of 4 nodes and 10 bookings of 5 GPUs (they fit only on 8-GPU nodes)
    quotes = [
        quote_create(
            acting=acting_as(u),
            gpu_model="h100",
            period="day",
            period_count=1,
            **({"node_count": 4} if i < 6 else {"gpu_count": 5}),
        )  # fmt: skip
        for i, u in enumerate(users)
    ]
    barrier = threading.Barrier(len(users))

    def attempt(i):
        try:
            barrier.wait()
            try:
                allocation_book(acting=acting_as(users[i]), quote=quotes[i])
                return "ok"
            except NoCapacity as exc:
                assert exc.earliest_start is not None
                return "no_capacity"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(len(users)) as pool:
        results = list(pool.map(attempt, range(len(users))))

    assert_whole_clusters()
    clusters = Cluster.objects.count()
    assert results[:6].count("ok") == clusters
    # At least 4 of the 6 clusters lose; each may lose only if fewer than 4 whole nodes of
    # the group were left for it.
    untouched = [
        n for n in group if not AllocationGpu.objects.filter(gpu__node=n, released=False).exists()
    ]
    assert len(untouched) < 4, "a cluster was refused while 4 whole nodes stayed free"
    singles = results[6:].count("ok")
    assert Allocation.objects.filter(cluster=None).count() == singles
    assert LedgerEntry.objects.count() == clusters + singles
