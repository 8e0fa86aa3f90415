"""Which notices are due, for whom, in which language, and how the console shows them."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from accounts.roles import acting_as
from accounts.services.profile import account_preferences_set
from rentals.models import RECEIPTS, Notice
from rentals.services import (
    allocation_stop,
    expiry_notices_record,
    notice_send,
    notices_unsent,
    stopped_notices_record,
)
from tests.support.booking import book
from tests.support.transactions import held_open

pytestmark = pytest.mark.django_db
User = get_user_model()


def _send_owed(now):
    for pk in notices_unsent(now=now, older_than=timedelta(0)):
        notice_send(notice_id=pk)


def test_a_one_day_rental_gets_no_24_hour_warning_right_after_booking(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day")
    assert expiry_notices_record(now=timezone.now() + timedelta(minutes=1)) == 0
    assert not Notice.objects.exclude(kind__in=RECEIPTS).exists()
    assert expiry_notices_record(now=allocation.paid_until - timedelta(minutes=30)) == 1
    assert Notice.objects.exclude(kind__in=RECEIPTS).get().kind == "expiry_1h"


def test_someone_without_e_mail_still_gets_the_console_notice(catalog, alice, client):
    alice.email = ""
    alice.save()
    allocation = book(alice, model="l4", count=1, period="day", periods=3)
    at = allocation.paid_until - timedelta(hours=20)
    assert expiry_notices_record(now=at) == 1
    _send_owed(at)
    assert mail.outbox == []
    client.force_login(alice)
    assert '<span class="badge"' in client.get("/").content.decode()
    page = client.get("/notices/").content.decode()
    assert "paid period ends at" in page and "Your booking is confirmed" in page
    assert not Notice.objects.filter(read_at__isnull=True).exists()
    assert '<span class="badge"' not in client.get("/").content.decode()


def test_the_mail_and_the_console_speak_the_owners_language(catalog, alice, client):
    account_preferences_set(user=alice, language="pl")
    allocation = book(alice, model="l4", count=1, period="day", periods=3)
    at = allocation.paid_until - timedelta(hours=20)
    expiry_notices_record(now=at)
    _send_owed(at)
    mails = " ".join(m.subject + m.body for m in mail.outbox)
    assert "kończy się" in mails and "Rezerwacja potwierdzona" in mails
    client.force_login(alice)
    client.cookies["django_language"] = "en"
    client.post("/i18n/setlang/", {"language": "pl", "next": "/"})
    assert "Przedłuż" in client.get("/notices/").content.decode()


def test_a_long_stop_while_paid_is_noticed_once(catalog, alice, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "NOTICE_STOPPED_HOURS": 2}
    allocation = book(alice, model="l4", count=1, period="day", periods=3)
    allocation_stop(acting=acting_as(alice), allocation=allocation)
    assert stopped_notices_record(now=timezone.now() + timedelta(hours=1)) == 0
    assert stopped_notices_record(now=timezone.now() + timedelta(hours=3)) == 1
    assert stopped_notices_record(now=timezone.now() + timedelta(hours=4)) == 0
    assert Notice.objects.exclude(kind__in=RECEIPTS).get().kind == "stopped_paid"
    _send_owed(timezone.now() + timedelta(hours=3))
    assert any("does not pause the paid period" in m.body for m in mail.outbox)


@pytest.mark.django_db(transaction=True)
def test_warnings_are_due_while_the_owner_changes_their_profile(catalog, alice, settings):
    """The sweeps lock the allocations they warn about, not their owners: a person's row held
    by another transaction (a profile change, a new sign-in) delays nobody's warning."""
    settings.ANCHORGPU = {**settings.ANCHORGPU, "NOTICE_STOPPED_HOURS": 2}
    allocation = book(alice, model="l4", count=1, period="day", periods=2)
    allocation_stop(acting=acting_as(alice), allocation=allocation)
    with held_open(lambda: User.objects.filter(pk=alice.pk).update(first_name="Alicja")):
        assert expiry_notices_record(now=allocation.paid_until - timedelta(hours=23)) == 1
        assert stopped_notices_record(now=timezone.now() + timedelta(hours=3)) == 1
