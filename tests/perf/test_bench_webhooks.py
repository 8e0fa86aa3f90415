"""Webhook delivery through the queue: recorded messages, delivered by a real Celery worker
(solo pool) to a loopback receiver, signed, with the delivery log written; against the same
worker running a no-op task per message in the same run (the queue's own cost)."""

import time
from datetime import UTC, datetime

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.cache import cache
from django.db import transaction

from accounts.roles import acting_as
from anchorgpu.celery import app
from tests.perf.conftest import report
from tests.support.receiver import Receiver
from tests.support.waiting import wait_for
from webhooks.messages import Message, body_text
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services import deliveries_record, endpoint_create

pytestmark = pytest.mark.django_db(transaction=True)
MESSAGES = 400
COUNTER = "bench:webhooks:noop"


@app.task(name="tests.perf.webhooks_noop", ignore_result=True)
def noop():
    cache.incr(COUNTER)


def test_webhook_deliveries_per_second(alice, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    team = acting_as(alice).team
    with Receiver() as receiver, start_worker(app, pool="solo", perform_ping_check=False):
        cache.set(COUNTER, 0, timeout=None)
        started = time.perf_counter()
        for _ in range(MESSAGES):
            noop.delay()
        assert wait_for(lambda: cache.get(COUNTER) == MESSAGES, timeout=300)
        noop_seconds = time.perf_counter() - started

        endpoint_create(acting=acting_as(alice), url=receiver.url, events=["booking.created"])
        now = datetime.now(UTC)
        messages = [
            Message(team.pk, "booking.created", f"bench_{i}",
                    body_text("booking.created", now, {"n": i, "pad": "x" * 400}))
            for i in range(MESSAGES)
        ]  # fmt: skip
        started = time.perf_counter()
        with transaction.atomic():
            deliveries_record(team_ids={team.pk}, build=lambda team_ids: messages)
        delivered = WebhookDelivery.objects.filter(status=DeliveryStatus.SUCCEEDED)
        assert wait_for(lambda: delivered.count() == MESSAGES, timeout=300)
        seconds = time.perf_counter() - started
    assert len(receiver.accepted()) == MESSAGES
    report(
        f"webhooks: {MESSAGES} messages, Redis broker, one solo worker, loopback receiver",
        {
            "no-op task per message (baseline)": {"per_s": MESSAGES / noop_seconds},
            "signed deliveries with their log": {
                "per_s": MESSAGES / seconds, "ratio": noop_seconds / seconds,
            },
        },
    )  # fmt: skip
