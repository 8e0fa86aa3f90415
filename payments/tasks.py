"""Payments' tasks: take ids, call a service, safe to retry."""

from celery import shared_task
from django.conf import settings

from payments.errors import ProcessorUnavailable
from payments.reminders import payment_reminders_send
from payments.services import credit_refund, payment_capture


@shared_task(bind=True, ignore_result=True, max_retries=None)
def payment_capture_task(self, payment_id: int) -> None:
    """Capture a booked payment whose capture failed after the commit; retried with a
    growing pause while the processor is down, until the attempts run out (then staff see
    it as capture_failed)."""
    try:
        payment_capture(payment_id=payment_id)
    except ProcessorUnavailable as exc:
        attempts = settings.PAYMENTS["CAPTURE_ATTEMPTS"]
        if self.request.retries + 1 >= attempts:
            return
        raise self.retry(exc=exc, countdown=min(600, 5 * 2**self.request.retries)) from exc


@shared_task(bind=True, ignore_result=True, max_retries=8)
def credit_refund_task(self, credit_note_id: int) -> None:
    """Refund a card team's credit note after the cancellation or credit committed."""
    try:
        credit_refund(credit_note_id=credit_note_id)
    except ProcessorUnavailable as exc:
        raise self.retry(exc=exc, countdown=min(600, 10 * 2**self.request.retries)) from exc


@shared_task(ignore_result=True)
def payment_reminders_task() -> int:
    """Daily: reminders before and after invoices' due dates."""
    return payment_reminders_send()
