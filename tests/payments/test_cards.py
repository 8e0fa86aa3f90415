"""Card mode against the real localstripe: save, book (authorised, captured), extend, cancel
(refunded), a decline, 3-D Secure, a lost race, a capture while the processor is down."""

from decimal import Decimal

import pytest
from django.conf import settings

from invoices.models import Invoice, InvoiceKind, InvoicePayment
from payments.models import Card, CashEntry, CashKind, Payment, PaymentState
from payments.services import cash_balances
from rentals.models import Allocation, LedgerEntry
from tests.payments.conftest import (
    DECLINES,
    THREE_D_SECURE,
    VISA,
    book,
    card_team,
    card_token,
    intent,
    key,
    quote,
)

pytestmark = pytest.mark.django_db


def test_a_card_is_saved_with_only_brand_last4_and_expiry(catalog, alice, alice_api):
    team = card_team(alice, number=None)
    response = alice_api.post(
        f"/api/v1/teams/{team.pk}/cards/", {"payment_method": card_token(VISA)}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["brand"], body["last4"], body["exp_month"], body["exp_year"], body["default"]) == (
        "visa", "4242", 12, 2031, True,
    )  # fmt: skip
    billing = alice_api.get(f"/api/v1/teams/{team.pk}/billing/").json()
    assert billing["mode"] == "card" and [c["last4"] for c in billing["cards"]] == ["4242"]


def test_an_unknown_or_anothers_payment_method_is_refused(catalog, alice, alice_api, bob, bob_api):
    team = card_team(alice)
    bob_team = card_team(bob, number=None)
    alices = Card.objects.get(team=team).processor_id
    garbage = alice_api.post(
        f"/api/v1/teams/{team.pk}/cards/", {"payment_method": "pm_nope"}, format="json"
    )
    stolen = bob_api.post(
        f"/api/v1/teams/{bob_team.pk}/cards/", {"payment_method": alices}, format="json"
    )
    malformed = alice_api.post(
        f"/api/v1/teams/{team.pk}/cards/", {"payment_method": "4242"}, format="json"
    )
    assert (garbage.status_code, stolen.status_code, malformed.status_code) == (404, 404, 400)
    assert Card.objects.filter(team=bob_team).count() == 0


def test_book_authorises_then_captures_the_quotes_gross(catalog, alice, alice_api):
    card_team(alice)
    body = quote(alice_api)
    response = book(alice_api, body["id"])
    assert response.status_code == 201, response.content
    payment = Payment.objects.get()
    assert payment.state == PaymentState.CAPTURED
    assert payment.amount == Decimal(body["total"])
    processor_side = intent(payment.intent_id)
    assert processor_side.status == "succeeded" and processor_side.amount == int(
        Decimal(body["total"]) * 100
    )
    invoice = Invoice.objects.get(kind=InvoiceKind.INVOICE)
    assert invoice.gross == Decimal(body["total"]) and invoice.due_on is None
    listed = alice_api.get("/api/v1/invoices/").json()["results"][0]
    assert listed["payment_status"] == "paid" and listed["paid_on"] is not None
    assert listed["allocations"] == [str(response.json()["id"])]
    [balance] = cash_balances(team=payment.team)
    assert (balance["paid"], balance["applied"], balance["balance"]) == (
        invoice.gross,
        invoice.gross,
        0,
    )


def test_the_same_key_books_and_charges_once(catalog, alice, alice_api):
    card_team(alice)
    body, k = quote(alice_api), key()
    first, again = book(alice_api, body["id"], k), book(alice_api, body["id"], k)
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    assert Payment.objects.count() == 1 and CashEntry.objects.count() == 1


def test_a_declined_card_is_402_in_words_and_final_and_nothing_is_booked(catalog, alice, alice_api):
    card_team(alice, DECLINES)
    body, k = quote(alice_api), key()
    response = book(alice_api, body["id"], k)
    assert response.status_code == 402, response.content
    problem = response.json()
    assert problem["code"] == "payment_declined" and "declined" in problem["detail"]
    again = book(alice_api, body["id"], k)
    assert again.status_code == 402 and again["Idempotent-Replayed"] == "true"
    assert Allocation.objects.count() == 0 and LedgerEntry.objects.count() == 0
    assert Payment.objects.get().state == PaymentState.DECLINED
    assert not CashEntry.objects.exists()


def test_three_d_secure_is_402_then_the_same_key_books_once(catalog, alice, alice_api):
    card_team(alice, THREE_D_SECURE)
    body, k = quote(alice_api), key()
    first = book(alice_api, body["id"], k)
    assert first.status_code == 402 and first.json()["code"] == "payment_requires_action"
    secret = first.json()["client_secret"]
    assert secret.startswith(first.json()["payment_intent"]) and "complete_url" in first.json()
    assert Allocation.objects.count() == 0
    # What Stripe.js's confirmCardPayment does in the browser (localstripe's 3-D Secure).
    import httpx  # noqa: PLC0415

    pi = first.json()["payment_intent"]
    done = httpx.post(
        f"{settings.PAYMENTS['API_BASE']}/v1/payment_intents/{pi}/_authenticate?success=true",
        json={"key": "pk_test_x", "client_secret": secret},
    )
    assert done.status_code == 200, done.text
    second = book(alice_api, body["id"], k)
    third = book(alice_api, body["id"], k)
    assert second.status_code == third.status_code == 201
    assert third["Idempotent-Replayed"] == "true"
    assert Allocation.objects.count() == 1 and Payment.objects.get().state == PaymentState.CAPTURED


def test_a_refused_booking_cancels_its_authorisation(catalog, alice, alice_api, bob):
    from tests.support.booking import book as book_directly  # noqa: PLC0415

    card_team(alice)
    body = quote(alice_api, gpu_model="l4", gpu_count=4, period="day")
    book_directly(bob, model="l4", count=4, period="day")  # bob takes every L4 first
    response = book(alice_api, body["id"])
    assert response.status_code == 409, response.content
    payment = Payment.objects.get()
    assert payment.state == PaymentState.CANCELLED
    assert intent(payment.intent_id).status == "canceled"
    assert not CashEntry.objects.exists()


def test_a_card_team_without_a_card_is_told_to_save_one(catalog, alice, alice_api):
    card_team(alice, number=None)
    response = book(alice_api, quote(alice_api)["id"])
    assert response.status_code == 402 and response.json()["code"] == "card_required"
    assert Allocation.objects.count() == 0


def test_extend_is_authorised_and_captured(catalog, alice, alice_api):
    card_team(alice)
    booked = book(alice_api, quote(alice_api)["id"]).json()
    pk = booked["id"]
    ext = alice_api.post(
        f"/api/v1/allocations/{pk}/extension-quotes/", {"period_count": 1}, format="json"
    )
    assert ext.status_code == 201, ext.content
    response = alice_api.post(
        f"/api/v1/allocations/{pk}/extend/", {"quote": ext.json()["id"]}, format="json",
        HTTP_IDEMPOTENCY_KEY=key(),
    )  # fmt: skip
    assert response.status_code == 200, response.content
    assert [p.state for p in Payment.objects.order_by("id")] == [PaymentState.CAPTURED] * 2
    assert Payment.objects.order_by("id").last().amount == Decimal(ext.json()["total"])
    # Without a quote a card team cannot be authorised first: refused in words.
    bare = alice_api.post(
        f"/api/v1/allocations/{pk}/extend/", {"period_count": 1}, format="json",
        HTTP_IDEMPOTENCY_KEY=key(),
    )  # fmt: skip
    assert bare.status_code == 402 and bare.json()["code"] == "payment_required"


def test_cancel_before_the_start_refunds_the_card(
    catalog, alice, alice_api, django_capture_on_commit_callbacks
):
    from datetime import timedelta  # noqa: PLC0415

    from django.utils import timezone  # noqa: PLC0415

    from payments.services import credit_refund  # noqa: PLC0415

    card_team(alice)
    starts = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    body = quote(alice_api, starts_at=starts.isoformat())
    pk = book(alice_api, body["id"]).json()["id"]
    response = alice_api.post(f"/api/v1/allocations/{pk}/cancel/")
    assert response.status_code == 200, response.content
    note = Invoice.objects.get(kind=InvoiceKind.CREDIT_NOTE)
    credit_refund(credit_note_id=note.pk)  # what credit_refund_task does after the commit
    refund = CashEntry.objects.get(kind=CashKind.REFUNDED)
    assert refund.amount == -note.gross == Decimal(body["total"])
    assert intent(Payment.objects.get().intent_id).latest_charge  # refunded at the processor
    [balance] = cash_balances(team=refund.team)
    assert balance["balance"] == 0 and balance["refunded"] == balance["paid"]
    credit_refund(credit_note_id=note.pk)  # again: nothing more
    assert CashEntry.objects.filter(kind=CashKind.REFUNDED).count() == 1
    assert InvoicePayment.objects.filter(invoice=note).get().amount == note.gross


def test_fa3_and_pdf_carry_the_payment_facts(catalog, alice, alice_api, bob, bob_api):
    from invoices.fa3 import invoice_xml  # noqa: PLC0415
    from invoices.pdf import invoice_pdf  # noqa: PLC0415
    from invoices.services import invoices_number  # noqa: PLC0415

    card_team(alice)
    book(alice_api, quote(alice_api)["id"])
    invoices_number()  # after the commit, by a worker
    paid = Invoice.objects.get(team__personal_for=alice)
    xml = invoice_xml(paid).decode()  # validated against the official schema inside
    assert "<Zaplacono>1</Zaplacono>" in xml and "<DataZaplaty>" in xml
    assert invoice_pdf(paid)[:4] == b"%PDF"
    book(bob_api, quote(bob_api)["id"])  # bob's team is invoiced (test default)
    invoices_number()
    due = Invoice.objects.get(team__personal_for=bob)
    xml = invoice_xml(due).decode()
    assert f"<Termin>{due.due_on.isoformat()}</Termin>" in xml and "Zaplacono" not in xml
