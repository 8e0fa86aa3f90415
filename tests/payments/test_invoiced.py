"""Invoiced mode: bookings within a credit limit per currency while no invoice is overdue."""

from datetime import datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone

from accounts.models import BillingMode, Team, TeamCreditLimit
from accounts.roles import personal_team
from invoices.models import Invoice, InvoiceKind
from invoices.selectors import invoice_today
from rentals.models import Allocation, LedgerEntry
from tests.payments.conftest import book, quote

pytestmark = pytest.mark.django_db


def invoiced(user, *, limit=None, terms=14, grace=0) -> Team:
    team = personal_team(user)
    Team.objects.filter(pk=team.pk).update(
        billing_mode=BillingMode.INVOICED, payment_terms_days=terms, grace_days=grace
    )
    if limit is not None:
        TeamCreditLimit.objects.create(team=team, currency="USD", amount=Decimal(limit))
    return Team.objects.get(pk=team.pk)


def test_an_invoiced_booking_has_its_due_date_and_is_unpaid(catalog, alice, alice_api):
    invoiced(alice, terms=14)
    assert book(alice_api, quote(alice_api)["id"]).status_code == 201
    invoice = Invoice.objects.get(kind=InvoiceKind.INVOICE)
    assert invoice.due_on == invoice.issued_on + timedelta(days=14)
    listed = alice_api.get("/api/v1/invoices/").json()["results"][0]
    assert (listed["payment_status"], listed["due_on"], listed["paid_on"]) == (
        "unpaid", invoice.due_on.isoformat(), None,
    )  # fmt: skip


def test_over_the_credit_limit_is_refused_in_words_and_nothing_is_booked(catalog, alice, alice_api):
    team = invoiced(alice, limit="1000.00")
    first = book(alice_api, quote(alice_api)["id"])  # 892.68
    assert first.status_code == 201
    second = book(alice_api, quote(alice_api, gpu_count=1)["id"])  # 446.34 more: 1339.02
    assert second.status_code == 402, second.content
    problem = second.json()
    assert problem["code"] == "credit_limit_exceeded" and "1000.00" in problem["detail"]
    assert (problem["owed"], problem["limit"]) == ("892.6800", "1000.0000")
    assert Allocation.objects.filter(team=team).count() == 1
    assert LedgerEntry.objects.count() == 1


def test_an_overdue_invoice_blocks_new_bookings_not_running_ones(catalog, alice, alice_api):
    invoiced(alice, terms=7, grace=2)
    running = book(alice_api, quote(alice_api, period="month")["id"]).json()
    # Overdue once the due date and its grace days have passed in the invoices' time zone;
    # noon there on the last day of grace, then on the day after (an hour-based travel from
    # "now" would cross a Warsaw midnight when run after 22:00 UTC).
    due_on = Invoice.objects.get(kind=InvoiceKind.INVOICE).due_on
    noon = datetime.combine(due_on, time(12), tzinfo=ZoneInfo(settings.INVOICES["TIME_ZONE"]))
    assert due_on == invoice_today() + timedelta(days=7)
    with time_machine.travel(noon + timedelta(days=2), tick=False):
        assert book(alice_api, quote(alice_api, gpu_count=1)["id"]).status_code == 201  # grace
    with time_machine.travel(noon + timedelta(days=3), tick=False):
        refused = book(alice_api, quote(alice_api, gpu_count=1)["id"])
        assert refused.status_code == 402 and refused.json()["code"] == "invoice_overdue"
        assert "overdue" in refused.json()["detail"]
        assert Allocation.objects.get(pk=running["id"]).state == "running"
        listed = alice_api.get("/api/v1/invoices/").json()["results"]
        assert "overdue" in {i["payment_status"] for i in listed}


def test_a_negative_credit_limit_is_refused_by_the_database(alice):
    from django.db import IntegrityError, transaction  # noqa: PLC0415

    team = invoiced(alice)
    with pytest.raises(IntegrityError), transaction.atomic():
        TeamCreditLimit.objects.create(team=team, currency="USD", amount=Decimal("-1"))


def test_reminders_before_and_after_the_due_date_once_each(catalog, alice, alice_api, mailoutbox):
    from payments.reminders import payment_reminders_send  # noqa: PLC0415

    invoiced(alice, terms=7)
    book(alice_api, quote(alice_api)["id"])
    assert payment_reminders_send() == 0  # due in 7 days: nothing yet
    with time_machine.travel(timezone.now() + timedelta(days=5), tick=False):
        assert payment_reminders_send() == 1 and payment_reminders_send() == 0
    with time_machine.travel(timezone.now() + timedelta(days=9), tick=False):
        assert payment_reminders_send() == 1
    assert [m.subject.split()[-1] for m in mailoutbox][-1] == "overdue"
    assert len(mailoutbox) == 2


def test_a_partly_paid_overdue_invoice_still_blocks_and_paying_the_rest_unblocks(
    catalog, alice, alice_api
):
    """The booking's one-statement check (`payments.sql.INVOICED_TERMS`) counts "owed" as the
    invoices' own payment status does: gross, less credit notes and what was applied."""
    from payments.services import cash_apply, invoices_overdue  # noqa: PLC0415

    team = invoiced(alice, terms=7)
    book(alice_api, quote(alice_api, period="month")["id"])
    invoice = Invoice.objects.get(kind=InvoiceKind.INVOICE)
    pay = {"team_id": team.pk, "currency": invoice.currency, "invoices": [invoice],
           "source": "manual", "reference": "test"}  # fmt: skip
    with time_machine.travel(timezone.now() + timedelta(days=8, hours=1), tick=False):
        assert [i.pk for i in invoices_overdue(team=team)] == [invoice.pk]
        cash_apply(amount=invoice.gross - Decimal("0.01"), at=timezone.now(), **pay)
        refused = book(alice_api, quote(alice_api, gpu_count=1)["id"])
        assert refused.status_code == 402 and refused.json()["code"] == "invoice_overdue"
        assert refused.json()["invoices"] == [invoice.display_number]
        assert Allocation.objects.filter(team=team).count() == 1
        cash_apply(amount=Decimal("0.01"), at=timezone.now(), **pay)
        assert invoices_overdue(team=team) == []
        assert book(alice_api, quote(alice_api, gpu_count=1)["id"]).status_code == 201
