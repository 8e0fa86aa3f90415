"""A real Celery worker on Redis runs our tasks and their effects land in PostgreSQL."""

from datetime import timedelta

import pytest

from anchorgpu.celery import app
from anchorgpu.schedule import beat_schedule
from rentals.models import Allocation
from rentals.tasks import (
    allocations_enforce_task,
    allocations_impairment_sync_task,
)
from reports.models import AllocatedStep, Step
from reports.tasks import allocated_steps_close_task
from telemetry.rollup import bucket_floor
from tests.support.booking import book, end_paid_periods_a_minute_ago
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_enforcement_task_runs_on_a_real_worker(catalog, alice, worker):
    allocation = book(alice, model="l4", count=1, period="day")
    end_paid_periods_a_minute_ago()

    allocations_enforce_task.delay()

    assert wait_for(lambda: Allocation.objects.get(pk=allocation.pk).state == "expired")
    assert list(allocation.events.values_list("kind", flat=True)) == ["booked", "expire"]


def test_the_impairment_sync_runs_on_a_real_worker(catalog, alice, worker):
    from core.db import db_now
    from telemetry.models import Flag, FlagKind, Severity

    allocation = book(alice, model="h100", count=1, period="day")
    gpu = allocation.current_holdings[0].gpu
    now = db_now()
    Flag.objects.create(
        node=gpu.node, gpu=gpu, kind=FlagKind.XID, code=79, severity=Severity.CRITICAL,
        opened_at=now, last_seen_at=now,
    )  # fmt: skip

    allocations_impairment_sync_task.delay()

    assert wait_for(lambda: Allocation.objects.get(pk=allocation.pk).impaired_since is not None)
    assert list(allocation.events.values_list("kind", flat=True)) == ["booked", "impaired"]


def test_the_fleet_report_steps_close_on_a_real_worker(catalog, alice, worker):
    from django.utils import timezone

    now = timezone.now()
    booked_at = now - timedelta(hours=5)
    book(alice, model="h100", count=2, period="day", now=booked_at)

    allocated_steps_close_task.delay()

    first = bucket_floor(booked_at, Step.HOUR)
    last = bucket_floor(now, Step.HOUR) - timedelta(hours=1)
    assert wait_for(lambda: AllocatedStep.objects.filter(bucket=Step.HOUR, at=last).exists())
    hours = AllocatedStep.objects.filter(
        bucket=Step.HOUR, at__gte=first - timedelta(hours=1), at__lte=last
    )
    assert list(hours.order_by("at").values_list("gpus", flat=True)) == [0, 2, 2, 2, 2, 2]


def test_beat_schedule_has_every_periodic_job_with_an_expiry():
    schedule = beat_schedule()
    assert set(schedule) == {
        "enforce-allocations",
        "send-expiry-warnings",
        "send-unsent-notices",
        "poll-nodes",
        "flag-gpu-activity",
        "sync-impairments",
        "rollup-telemetry",
        "close-holding-edges",
        "prune-telemetry",
        "purge-idempotency-keys",
        "purge-expired-quotes",
        "deliver-due-webhooks",
        "partition-telemetry",
        "prune-audit-log",
        "close-fleet-report-steps",
        "issue-held-invoices",
        "number-invoices",
        "payment-reminders",
        "refresh-capacity-summaries",
        "resume-statement-exports",
        "prune-statement-exports",
    }
    assert all(entry["options"]["expires"] > 0 for entry in schedule.values())
    assert schedule["poll-nodes"]["schedule"] == timedelta(seconds=15)
    assert app.conf.task_acks_late is True and app.conf.worker_prefetch_multiplier == 1


def test_the_remote_source_ingests_every_minute_on_the_poll_queue(settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "TELEMETRY_SOURCE": "prometheus"}
    schedule = beat_schedule()
    assert schedule["ingest-telemetry"]["task"] == "telemetry.tasks.telemetry_ingest_task"
    assert schedule["ingest-telemetry"]["schedule"] == timedelta(minutes=1)
    for task in ("telemetry_ingest_task", "telemetry_ingest_shard_task",
                 "nodes_remote_poll_shard_task"):  # fmt: skip
        assert app.amqp.router.route({}, f"telemetry.tasks.{task}")["queue"].name == "poll"


def test_polling_and_the_rollup_passes_have_their_own_queues_and_the_rest_the_default():
    def queue(task):
        return app.amqp.router.route({}, task)["queue"].name

    assert queue("telemetry.tasks.nodes_poll_task") == "poll"
    assert queue("telemetry.tasks.nodes_poll_shard_task") == "poll"
    assert queue("telemetry.tasks.telemetry_rollup_shard_task") == "rollup"
    assert queue("telemetry.tasks.fleet_rollups_refresh_task") == "rollup"
    for task in ("rentals.tasks.allocations_enforce_task", "webhooks.tasks.webhook_deliver_task",
                 "telemetry.tasks.telemetry_rollup_task"):  # fmt: skip
        assert queue(task) == "default"


def test_a_held_invoice_is_told_to_staff_by_a_real_worker(catalog, alice, worker):
    """The booking's commit queues the alert (invoices.receivers): no rate for USD here."""
    from django.core import mail

    from invoices.models import HeldInvoice
    from tests.support.factories.accounts import person

    person("root", "pw-root-123456", is_staff=True, is_superuser=True)

    book(alice, model="l4", count=1, period="day")

    assert wait_for(lambda: HeldInvoice.objects.filter(alerted_at__isnull=False).exists())

    def alerts():
        return [m for m in mail.outbox if "held" in m.subject]

    assert wait_for(lambda: len(alerts()) == 1)  # beside the booking's receipt to alice
    assert alerts()[0].to == ["root@example.com"]
