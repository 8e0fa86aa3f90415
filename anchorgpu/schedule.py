"""Every periodic task in one place. Exactly one `celery beat` runs this schedule.

Each entry expires after its own interval, so a backlog of stale runs is dropped
instead of piling up when workers fall behind.
"""

from datetime import timedelta

from celery.schedules import crontab
from django.conf import settings


def beat_schedule():
    conf = settings.ANCHORGPU
    enforce = conf["ENFORCE_INTERVAL"]
    poll = conf["POLL_INTERVAL"]
    schedule = {
        "enforce-allocations": {
            "task": "rentals.tasks.allocations_enforce_task",
            "schedule": timedelta(seconds=enforce),
            "options": {"expires": enforce},
        },
        "send-expiry-warnings": {
            "task": "rentals.tasks.expiry_notices_record_task",
            "schedule": timedelta(seconds=enforce),
            "options": {"expires": enforce},
        },
        "send-unsent-notices": {
            "task": "rentals.tasks.notices_unsent_send_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        },
        "poll-nodes": {
            "task": "telemetry.tasks.nodes_poll_task",
            "schedule": timedelta(seconds=poll),
            "options": {"expires": poll},
        },
        "flag-gpu-activity": {
            "task": "rentals.tasks.gpu_activity_flags_task",
            "schedule": timedelta(seconds=poll),
            "options": {"expires": poll},
        },
        # After the polls' flags (the same interval): a GPU that cannot work marks its
        # allocation impaired within two polling intervals.
        "sync-impairments": {
            "task": "rentals.tasks.allocations_impairment_sync_task",
            "schedule": timedelta(seconds=poll),
            "options": {"expires": poll},
        },
        # The capacity read model, whatever changed (changes also refresh it within seconds).
        "refresh-capacity-summaries": {
            "task": "rentals.tasks.capacity_summaries_refresh_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        },
        "rollup-telemetry": {
            "task": "telemetry.tasks.telemetry_rollup_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        },
        # The holdings' partial first and last hours, once the rollup has closed them.
        "close-holding-edges": {
            "task": "rentals.tasks.holding_edges_close_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        },
        # The fleet report's hours and days once they close (reports.models.AllocatedStep).
        "close-fleet-report-steps": {
            "task": "reports.tasks.allocated_steps_close_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        },
        "prune-telemetry": {
            "task": "telemetry.tasks.telemetry_prune_task",
            "schedule": crontab(minute=17),
            "options": {"expires": 3600},
        },
        "partition-telemetry": {
            "task": "telemetry.tasks.sample_partitions_ensure_task",
            "schedule": crontab(minute=47),
            "options": {"expires": 3600},
        },
        "purge-expired-quotes": {
            "task": "rentals.tasks.quotes_expired_purge_task",
            "schedule": crontab(minute=37),
            "options": {"expires": 3600},
        },
        "deliver-due-webhooks": {
            "task": "webhooks.tasks.webhook_deliveries_due_task",
            "schedule": timedelta(seconds=30),
            "options": {"expires": 30},
        },
        "prune-audit-log": {
            "task": "audit.tasks.audit_prune_task",
            "schedule": crontab(minute=27),
            "options": {"expires": 3600},
        },
        # Statement exports: queue those a writer still owes, drop the expired ones' files.
        "resume-statement-exports": {
            "task": "rentals.tasks.statement_exports_resume_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        },
        "prune-statement-exports": {
            "task": "rentals.tasks.statement_exports_prune_task",
            "schedule": crontab(minute=52),
            "options": {"expires": 3600},
        },
        "purge-idempotency-keys": {
            "task": "rentals.tasks.idempotency_keys_purge_task",
            "schedule": crontab(minute=7),
            "options": {"expires": 3600},
        },
    }
    # Invoices held for an exchange rate: issued once the rate exists (staff entering it in
    # the admin issues them at once; this catches any other way in), staff told of new ones.
    # Reminders of invoiced teams' unpaid invoices, before and after their due dates.
    schedule["payment-reminders"] = {
        "task": "payments.tasks.payment_reminders_task",
        "schedule": crontab(minute=30, hour=8),
        "options": {"expires": 3600},
    }
    # Invoices are numbered after their commit: cued by each commit, and swept this often.
    schedule["number-invoices"] = {
        "task": "invoices.tasks.invoices_number_task",
        "schedule": timedelta(seconds=5),
        "options": {"expires": 5},
    }
    schedule["issue-held-invoices"] = {
        "task": "invoices.tasks.invoices_catch_up_task",
        "schedule": crontab(minute=12),
        "options": {"expires": 3600},
    }
    if conf["DEMO"]:  # the demo keeps made-up rates for its currencies
        schedule["keep-demo-exchange-rates"] = {
            "task": "invoices.tasks.exchange_rates_demo_task",
            "schedule": crontab(minute=2),
            "options": {"expires": 3600},
        }
    if conf["TELEMETRY_SOURCE"] == "prometheus":  # the closed minutes from the operator's engine
        schedule["ingest-telemetry"] = {
            "task": "telemetry.tasks.telemetry_ingest_task",
            "schedule": timedelta(minutes=1),
            "options": {"expires": 60},
        }
    return schedule
