from celery import shared_task

from invoices.models import KsefSubmission
from invoices.services import KSEF_MAX_ATTEMPTS, KsefRetry, ksef_retry_in, ksef_submit


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
