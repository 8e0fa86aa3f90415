from celery import shared_task

from webhooks.services import deliveries_due_queue, delivery_attempt

# Retries further ahead than this wait in the database for the sweep, not in the broker
# (a Redis broker redelivers countdowns longer than its visibility timeout).
COUNTDOWN_MAX_SECONDS = 600


@shared_task(ignore_result=True, soft_time_limit=60)
def webhook_deliver_task(delivery_id: int) -> None:
    attempt = delivery_attempt(delivery_id=delivery_id)
    if attempt and attempt.retry_in is not None and attempt.retry_in <= COUNTDOWN_MAX_SECONDS:
        webhook_deliver_task.apply_async((delivery_id,), countdown=attempt.retry_in)


@shared_task(ignore_result=True)
def webhook_deliveries_due_task() -> int:
    return deliveries_due_queue()
