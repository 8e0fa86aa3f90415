"""The processor's webhook (signed, applied once), a capture retried after the processor
was down, and an impairment credit refunded to the card."""

import hashlib
import hmac
import json
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.test import override_settings

from invoices.models import Invoice, InvoiceKind, InvoicePayment
from payments import processor
from payments.models import CashEntry, CashKind, Payment, PaymentState, ProcessorEvent
from payments.services import cash_balances, credit_refund, payment_capture
from rentals.models import Allocation, ImpairedSpan
from rentals.services.credits import credit_note_issue
from tests.payments.conftest import book, card_team, quote
from tests.support.operators import operator

pytestmark = pytest.mark.django_db


def _signed(client, event: dict, secret=None):
    payload = json.dumps(event)
    stamp = int(time.time())
    secret = secret or settings.PAYMENTS["WEBHOOK_SECRET"]
    mac = hmac.new(secret.encode(), f"{stamp}.{payload}".encode(), hashlib.sha256).hexdigest()
    return client.post(
        "/webhooks/stripe/", payload, content_type="application/json",
        HTTP_STRIPE_SIGNATURE=f"t={stamp},v1={mac}",
    )  # fmt: skip


def _book_with_capture_down(alice_api, body):
    """Book while the processor is down for the capture after the commit."""
    from payments import services  # noqa: PLC0415

    down = {**settings.PAYMENTS, "API_BASE": "http://127.0.0.1:9", "TIMEOUT": 1.0}
    real_capture = services.payment_capture

    def capture_while_down(*, payment_id):
        with override_settings(PAYMENTS=down):
            return real_capture(payment_id=payment_id)

    services.payment_capture = capture_while_down
    try:
        return book(alice_api, body["id"])
    finally:
        services.payment_capture = real_capture


def test_a_forged_event_is_refused_and_a_replayed_one_changes_nothing(
    catalog, alice, alice_api, client
):
    card_team(alice)
    _book_with_capture_down(alice_api, quote(alice_api))
    payment = Payment.objects.get()
    processor.client().v1.payment_intents.capture(payment.intent_id)  # the processor did it
    event = {
        "id": "evt_1", "type": "payment_intent.succeeded",
        "data": {"object": {"id": payment.intent_id, "object": "payment_intent"}},
    }  # fmt: skip
    forged = _signed(client, event, secret="whsec_not_ours")
    assert forged.status_code == 400 and forged.json()["code"] == "signature_invalid"
    unsigned = client.post("/webhooks/stripe/", json.dumps(event), content_type="application/json")
    assert unsigned.status_code == 400
    assert not ProcessorEvent.objects.exists()
    assert Payment.objects.get().state == PaymentState.BOOKED
    first, replay = _signed(client, event), _signed(client, event)
    assert (first.json()["applied"], replay.json()["applied"]) == (True, False)
    assert Payment.objects.get().state == PaymentState.CAPTURED
    assert ProcessorEvent.objects.count() == 1
    assert CashEntry.objects.filter(kind=CashKind.RECEIVED).count() == 1  # not twice


def test_a_capture_that_fails_after_commit_is_retried_once_the_processor_is_back(
    catalog, alice, alice_api
):
    card_team(alice)
    response = _book_with_capture_down(alice_api, quote(alice_api))
    assert response.status_code == 201  # booked: access at commit, as today
    payment = Payment.objects.get()
    assert (payment.state, payment.capture_attempts) == (PaymentState.BOOKED, 1)
    listed = alice_api.get("/api/v1/invoices/").json()["results"][0]
    assert listed["payment_status"] == "unpaid"
    # What payment_capture_task does on its retry, the processor back.
    assert payment_capture(payment_id=payment.pk).state == PaymentState.CAPTURED
    assert alice_api.get("/api/v1/invoices/").json()["results"][0]["payment_status"] == "paid"
    assert payment_capture(payment_id=payment.pk).state == PaymentState.CAPTURED  # once


def test_an_impairment_credit_is_refunded_to_the_card(catalog, alice, alice_api):
    card_team(alice)
    body = quote(alice_api)
    pk = book(alice_api, body["id"]).json()["id"]
    allocation = Allocation.objects.get(pk=pk)
    start = allocation.paid_from + timedelta(hours=1)
    ImpairedSpan.objects.create(
        allocation=allocation, started_at=start, ended_at=start + timedelta(hours=5),
        gpus=[h.gpu_id for h in allocation.current_holdings][:1],
    )  # fmt: skip
    credited = credit_note_issue(operator=operator(), allocation_id=allocation.pk)
    note = Invoice.objects.get(kind=InvoiceKind.CREDIT_NOTE)
    assert -note.gross == credited.total
    credit_refund(credit_note_id=note.pk)
    refund = CashEntry.objects.get(kind=CashKind.REFUNDED)
    assert refund.amount == credited.total  # refunds = credit notes
    assert InvoicePayment.objects.get(invoice=note).amount == note.gross
    [balance] = cash_balances(team=refund.team)
    assert balance["balance"] == Decimal(0)
    assert balance["paid"] - balance["refunded"] == Decimal(body["total"]) - credited.total
