"""The Celery queues, named once: the settings route tasks to them, the launcher starts a
worker for each, /metrics measures each one's depth. No Django here (the launcher reads it
before Django starts)."""

DEFAULT = "default"  # enforcement, notices, the rollup's start each minute, webhooks, invoices
POLL = "poll"  # telemetry polling and ingest: add worker processes as the fleet grows
ROLLUP = "rollup"  # the rollup's shard passes and the sums after them: add processes likewise
ALL = (DEFAULT, POLL, ROLLUP)
