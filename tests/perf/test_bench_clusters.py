"""Cluster booking on a 2,000-node fleet in InfiniBand groups of 32: 8 threads booking
4-node clusters through the service, against single-GPU bookings on the same fleet in the
same run, and the whole-node start windows a cluster quote reads."""

import time
from datetime import timedelta

import pytest

from accounts.roles import acting_as
from catalog.demo import seed_catalog
from catalog.models import GpuModel
from core.db import db_now
from rentals.models import Allocation, Cluster
from rentals.selectors.availability import start_windows
from rentals.services import quote_create
from tests.perf.conftest import book_in_threads, h100_fleet, report
from tests.support.races import overlapping_pairs

pytestmark = pytest.mark.django_db(transaction=True)
NODES, GROUP, THREADS, PER_THREAD, CLUSTER = 2000, 32, 8, 10, 4


def _quotes(users, **request):
    return {
        u.pk: [
            quote_create(acting=acting_as(u), gpu_model="h100-sxm", period="day", period_count=1,
                         **request)
            for _ in range(PER_THREAD)
        ]
        for u in users
    }  # fmt: skip


def test_cluster_bookings_per_second(django_user_model):
    seed_catalog()
    h100_fleet("cl", NODES, group_size=GROUP)
    users = [django_user_model.objects.create_user(f"c{i}") for i in range(THREADS)]

    singles = book_in_threads(users, _quotes(users, gpu_count=1))
    single_bps = THREADS * PER_THREAD / singles
    clusters = book_in_threads(users, _quotes(users, node_count=CLUSTER))
    cluster_bps = THREADS * PER_THREAD / clusters

    assert Cluster.objects.count() == THREADS * PER_THREAD
    assert Allocation.objects.exclude(cluster=None).count() == THREADS * PER_THREAD * CLUSTER
    assert overlapping_pairs() == 0
    model = GpuModel.objects.get(slug="h100-sxm")
    started = time.perf_counter()
    windows = start_windows(
        gpu_model=model, duration=timedelta(days=7), not_before=db_now(), node_count=CLUSTER
    )
    windows_ms = (time.perf_counter() - started) * 1000
    assert windows
    report(
        f"cluster booking: {NODES} nodes in groups of {GROUP}, {THREADS} threads",
        {
            "single-GPU bookings (baseline)": {"bookings_per_s": single_bps},
            f"{CLUSTER}-node clusters": {
                "clusters_per_s": cluster_bps,
                "nodes_per_s": cluster_bps * CLUSTER,
                "ratio": cluster_bps / single_bps,
            },
            f"whole-node start windows ({CLUSTER} nodes × a week)": {"ms": windows_ms},
        },
    )
