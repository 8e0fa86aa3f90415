from celery import shared_task

from invoices.models import KsefSubmission
from invoices.services import (
    KSEF_MAX_ATTEMPTS,
    KsefRetry,
    exchange_rates_demo_keep,
    invoices_held_alert,
    invoices_issue_missing,
    invoices_number,
    ksef_retry_in,
    ksef_submit,
)


@shared_task(ignore_result=True)
def invoices_held_alert_task() -> int:
    """Tell staff of invoices newly held for an exchange rate (after the booking's commit)."""
    return invoices_held_alert()


@shared_task(ignore_result=True)
def invoices_number_task() -> int:
    """Number the documents committed since the last run (cued after each issuing commit,
    at most once a second, and every few seconds by beat); how many were numbered."""
    return len(invoices_number())


@shared_task
def invoices_catch_up_task() -> dict:
    """Hourly: issue what waited (a rate entered some other way than the admin) and tell
    staff of what is still held and nobody was told of (a broker that was down)."""
    return {"issued": invoices_issue_missing(), "alerted": invoices_held_alert()}


@shared_task
def exchange_rates_demo_task() -> int:
    """The demo only (ANCHORGPU_DEMO): today's made-up rates for the catalog's currencies."""
    return exchange_rates_demo_keep()


@shared_task(ignore_result=True, soft_time_limit=60)
def ksef_submit_task(invoice_id: int) -> None:
    """Send one document to KSeF; on a failure KSeF may pass later, try again with backoff."""
    try:
        ksef_submit(invoice_id=invoice_id)
    except KsefRetry:
        attempts = KsefSubmission.objects.get(invoice_id=invoice_id).attempts
        if attempts < KSEF_MAX_ATTEMPTS:
            ksef_submit_task.apply_async(
                (invoice_id,), countdown=ksef_retry_in(attempts).total_seconds()
            )
