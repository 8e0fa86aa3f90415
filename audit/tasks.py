from celery import shared_task

from audit import services


@shared_task
def audit_prune_task():
    return services.audit_prune()
