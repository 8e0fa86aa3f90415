"""Every queue a task is routed to has a worker in `make run` and its depth on /metrics."""

import time

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from accounts.services.tokens import api_token_create
from anchorgpu import queues
from anchorgpu.celery import app
from telemetry.tasks import REFRESH_DEBOUNCE_SECONDS, fleet_rollups_refresh_queue, nodes_poll_task

pytestmark = pytest.mark.django_db


def _project_tasks():
    app.loader.import_default_modules()
    return sorted(name for name in app.tasks if not name.startswith("celery."))


def _depths(client, staff) -> dict[str, float]:
    token = api_token_create(user=staff, name="grafana")
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    family = next(
        f for f in text_string_to_metric_families(text) if f.name == "anchorgpu_celery_queue_depth"
    )
    return {sample.labels["queue"]: sample.value for sample in family.samples}


def test_every_task_goes_to_a_queue_that_workers_take():
    routed = {name: app.amqp.router.route({}, name)["queue"].name for name in _project_tasks()}
    assert len(routed) > 20
    assert set(routed.values()) == set(queues.ALL) == set(settings.WORKER_QUEUES)
    assert routed["telemetry.tasks.nodes_poll_task"] == queues.POLL
    assert {name for name, queue in routed.items() if queue == queues.ROLLUP} == {
        "telemetry.tasks.telemetry_rollup_shard_task",
        "telemetry.tasks.fleet_rollups_refresh_task",
    }


def test_metrics_measure_the_depth_of_every_queue_a_task_waits_in(client, staff):
    app.control.purge()
    try:
        assert _depths(client, staff) == dict.fromkeys(queues.ALL, 0)
        nodes_poll_task.delay()  # no worker runs here: it waits in its queue
        assert _depths(client, staff) == {queues.DEFAULT: 0, queues.POLL: 1, queues.ROLLUP: 0}
    finally:
        app.control.purge()


def test_metrics_measure_the_rollup_queue_that_every_shard_pass_waits_in(client, staff):
    """Every task routed to the rollup queue waits there, measured, until a worker takes it."""
    routed = [
        name for name in _project_tasks()
        if app.amqp.router.route({}, name)["queue"].name == queues.ROLLUP
    ]  # fmt: skip
    app.control.purge()
    try:
        for name in routed:
            app.send_task(name)  # no worker runs here: each waits in the rollup queue
        assert _depths(client, staff) == {
            queues.DEFAULT: 0, queues.POLL: 0, queues.ROLLUP: len(routed)
        }  # fmt: skip
    finally:
        app.control.purge()


def test_shard_passes_finishing_together_queue_one_refresh(client, staff):
    """Each shard pass asks for a refresh of the sums after the shards as it finishes: the
    passes of a run, finishing within the debounce, queue one between them, and a pass that
    finishes after it queues the next."""
    app.control.purge()
    try:
        asked = [fleet_rollups_refresh_queue() for _ in range(5)]
        assert asked == [True, False, False, False, False]
        assert _depths(client, staff)[queues.ROLLUP] == 1
        time.sleep(REFRESH_DEBOUNCE_SECONDS + 0.1)  # the first is about to run: a new one
        assert fleet_rollups_refresh_queue()
        assert _depths(client, staff)[queues.ROLLUP] == 2
    finally:
        app.control.purge()
