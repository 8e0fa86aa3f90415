"""Celery tasks of the rentals layer: thin, idempotent wrappers around services.
Schedules: anchorgpu/schedule.py."""

from celery import shared_task
from django.conf import settings

from rentals import idempotency, services
from rentals.services import edges, exports, impairments, summary

NOTICE_RETRIES = 12  # with the doubling backoff below (capped at 4 h), about a day of tries


@shared_task
def allocations_enforce_task():
    return services.allocations_enforce()


@shared_task
def expiry_notices_record_task():
    return services.expiry_notices_record() + services.stopped_notices_record()


@shared_task(bind=True, max_retries=NOTICE_RETRIES)
def notice_send_task(self, notice_id):
    """Send one notice's mail; a failed send is retried with exponential backoff."""
    try:
        return services.notice_send(notice_id=notice_id)
    except Exception as exc:  # the mail server's failure, whatever its type
        base = settings.ANCHORGPU["NOTICE_RETRY_SECONDS"]
        countdown = min(base * 2**self.request.retries, 4 * 3600)
        raise self.retry(exc=exc, countdown=countdown) from exc


@shared_task
def notices_unsent_send_task():
    """Queue the notices whose mail is still owed (the safety net behind after-commit)."""
    pending = services.notices_unsent()
    for pk in pending:
        notice_send_task.delay(pk)
    return len(pending)


@shared_task
def gpu_activity_flags_task():
    return services.gpu_activity_flags_update()


@shared_task
def allocations_impairment_sync_task():
    """After the polls' flags: mark, clear and (by policy) replace impaired allocations, a
    shard of nodes a task as polling is sharded (one shard: here, at once). Returns the
    shards queued, or what the one shard did."""
    shards = impairments.impairment_shards()
    if len(shards) <= 1:
        done = services.allocations_impairment_sync(nodes=shards[0] if shards else [])
        return {k: len(v) for k, v in done.items()}
    for shard in shards:
        allocations_impairment_sync_shard_task.apply_async(
            args=[shard], expires=settings.ANCHORGPU["POLL_INTERVAL"]
        )
    return {"shards": len(shards)}


@shared_task
def allocations_impairment_sync_shard_task(node_ids):
    done = services.allocations_impairment_sync(nodes=node_ids)
    return {k: len(v) for k, v in done.items()}


@shared_task
def idempotency_keys_purge_task():
    return idempotency.idempotency_keys_purge()


@shared_task
def quotes_expired_purge_task():
    return services.quotes_expired_purge()


@shared_task(bind=True, max_retries=5)
def capacity_summary_refresh_task(self, gpu_model_id):
    """After a change to the model's holdings: its summary, unless already at the change's
    version; while another refresh of the model runs, again a second later (that one may
    have read the version before this change)."""
    done = summary.capacity_summary_refresh(gpu_model_id=gpu_model_id, force=False)
    if done == "busy":
        raise self.retry(countdown=1)
    return done


@shared_task
def capacity_summaries_refresh_task():
    """Every model's summary, whatever changed: time alone moves holdings in and out."""
    return summary.capacity_summaries_refresh()


@shared_task
def statement_export_run_task(export_id):
    """Write one statement export. Not retried here: a failed attempt hands the export back
    to `statement_exports_resume_task`, which queues it again after a wait."""
    return exports.statement_export_run(export_id=export_id)


@shared_task
def statement_exports_resume_task():
    """Queue the exports still owed a writer (a lost queueing, a dead worker, a retry)."""
    return len(exports.statement_exports_resume())


@shared_task
def statement_exports_prune_task():
    """Drop the files of expired statement exports."""
    return exports.statement_exports_prune()


@shared_task
def holding_edges_close_task():
    """Every minute, after the rollup: the holdings' partial hours that closed."""
    return edges.holding_edges_close()
