"""The processor's webhook: events verified by their signature (PAYMENTS["WEBHOOK_SECRET"])
and applied once, by event id, in one transaction with what they change. A forged event
is refused (400) and changes nothing; a replayed one answers 200 and changes nothing."""

import json
import logging

import stripe
from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import JsonResponse
from django.utils.translation import gettext as _

from core.problems import problem_json
from payments.models import Payment, PaymentState, ProcessorEvent
from payments.services import payment_captured

log = logging.getLogger(__name__)


def _problem(status: int, code: str, detail: str) -> JsonResponse:
    return problem_json(status_code=status, title=detail, detail=detail, code=code)


def webhook_response(request) -> JsonResponse:
    secret = settings.PAYMENTS["WEBHOOK_SECRET"]
    if not secret:
        return _problem(503, "webhooks_off", _("No webhook secret is configured."))
    signature = request.headers.get("Stripe-Signature", "")
    try:
        stripe.WebhookSignature.verify_header(request.body.decode("utf-8"), signature, secret)
        event = json.loads(request.body)
        event_id, kind = str(event["id"]), str(event["type"])
        obj = event.get("data", {}).get("object", {}) or {}
    except (stripe.SignatureVerificationError, ValueError, KeyError, TypeError, UnicodeError):
        return _problem(400, "signature_invalid", _("The event's signature does not verify."))
    applied = event_apply(event_id=event_id, kind=kind, obj=obj)
    return JsonResponse({"received": True, "applied": applied})


def event_apply(*, event_id: str, kind: str, obj: dict) -> bool:
    """Apply one verified event once; False for a replay (nothing changes)."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                ProcessorEvent.objects.create(event_id=event_id[:100], type=kind[:100])
        except IntegrityError:
            return False  # a replay
        _apply(kind, obj)  # fails: the event row rolls back too, and the processor resends
    return True


def _apply(kind: str, obj: dict) -> None:
    intent_id = obj.get("id") if obj.get("object") == "payment_intent" else None
    if not intent_id:
        return
    payment = Payment.objects.filter(intent_id=intent_id).first()
    if payment is None:
        return
    if kind == "payment_intent.succeeded" and payment.state in (
        PaymentState.BOOKED,
        PaymentState.CAPTURE_FAILED,
    ):
        payment_captured(payment_id=payment.pk)
    elif kind == "payment_intent.canceled":
        Payment.objects.filter(
            pk=payment.pk, state__in=[PaymentState.AUTHORISED, PaymentState.REQUIRES_ACTION]
        ).update(state=PaymentState.CANCELLED)
