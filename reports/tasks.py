"""Celery tasks of the reports layer: thin, idempotent wrappers around services.
Schedules: anchorgpu/schedule.py."""

from celery import shared_task

from reports import services


@shared_task
def allocated_steps_close_task() -> dict[str, int]:
    return services.allocated_steps_close()
