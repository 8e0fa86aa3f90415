"""Expiry notices are e-mailed after the transaction that records them commits, by a real
worker: a failed send is retried, and a sent mail is never sent again."""

from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend

from anchorgpu.celery import app
from rentals.models import Notice
from rentals.services import expiry_notices_record, notice_send
from rentals.tasks import notices_unsent_send_task
from tests.support.booking import book
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


class MailServerDownOnce(EmailBackend):
    """The mail server (outside AnchorGPU) refuses the first message, then accepts."""

    refusals = 0

    def send_messages(self, messages):
        if type(self).refusals == 0:
            type(self).refusals += 1
            raise ConnectionRefusedError("mail server down")
        return super().send_messages(messages)


def test_a_failed_send_is_retried_and_the_mail_goes_out_once(catalog, alice, settings):
    settings.EMAIL_BACKEND = f"{__name__}.MailServerDownOnce"
    settings.ANCHORGPU = {**settings.ANCHORGPU, "NOTICE_RETRY_SECONDS": 0.2}
    MailServerDownOnce.refusals = 0
    allocation = book(alice, model="l4", count=1, period="day", periods=2)
    due = allocation.paid_until - timedelta(hours=23)  # the 24 h warning is due

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        assert expiry_notices_record(now=due) == 1  # commits, then queues the mail
        # the booking's receipt (queued when the booking committed) and the warning
        assert wait_for(lambda: Notice.objects.filter(sent_at__isnull=False).count() == 2)
        assert notices_unsent_send_task.apply().get() == 0  # the safety net finds none owed

    warning, receipt = Notice.objects.get(kind="expiry_24h"), Notice.objects.get(kind="booked")
    assert MailServerDownOnce.refusals == 1 and warning.attempts + receipt.attempts == 3
    assert notice_send(notice_id=warning.pk) is False  # a sent notice is never sent again
    assert notice_send(notice_id=receipt.pk) is False
    assert len(mail.outbox) == 2 and {m.to[0] for m in mail.outbox} == {"alice@example.com"}
    assert len({m.subject for m in mail.outbox}) == 2
    assert expiry_notices_record(now=due) == 0
