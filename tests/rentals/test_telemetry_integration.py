"""Real Celery worker and beat on Redis: the simulator on loopback polled into PostgreSQL, and
an ended paid period expired by the enforcement schedule."""

from datetime import timedelta

import pytest
from celery.beat import EmbeddedService

from anchorgpu.celery import app
from catalog.models import NodeHealth
from rentals.models import Allocation
from rentals.simulation import simulated_fleet
from telemetry.models import GpuSample
from telemetry.simulator import Simulator
from tests.support.booking import book, end_paid_periods_a_minute_ago
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_beat_and_worker_poll_nodes_and_enforce_paid_periods(catalog, alice, tmp_path, worker):
    ended = book(alice, model="l4", count=1, period="day")
    end_paid_periods_a_minute_ago()
    simulator = Simulator(simulated_fleet, refresh=0.5).start_in_thread()
    for node in catalog.nodes:
        node.telemetry_url = simulator.url_for(node.hostname)
        node.save(update_fields=["telemetry_url"])
    schedule = app.conf.beat_schedule
    app.conf.beat_schedule = {
        "poll-nodes": {"task": "telemetry.tasks.nodes_poll_task", "schedule": timedelta(seconds=1)},
        "enforce": {
            "task": "rentals.tasks.allocations_enforce_task",
            "schedule": timedelta(seconds=1),
        },
    }
    beat = EmbeddedService(
        app, thread=True, schedule_filename=str(tmp_path / "beat"), max_interval=1
    )
    try:
        beat.start()
        gpus = sum(node.gpus.count() for node in catalog.nodes)
        assert wait_for(lambda: GpuSample.objects.count() >= 2 * gpus, timeout=45)
        assert wait_for(lambda: Allocation.objects.get(pk=ended.pk).state == "expired")
    finally:
        beat.stop()
        app.conf.beat_schedule = schedule
        simulator.stop()
    for node in catalog.nodes:
        node.refresh_from_db()
        assert node.health == NodeHealth.HEALTHY, node.health_detail
