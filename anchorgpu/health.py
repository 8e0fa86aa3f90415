"""Liveness and readiness probes for load balancers and orchestrators.

Anyone may call them, so they name what is down but never why: the exception (host names,
user names) goes to the log.
"""

import logging

from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


@require_GET
@never_cache
def healthz(request):
    return JsonResponse({"status": "ok"})


def _database_state():
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:  # any failure to reach or read the database means "down"
        logger.exception("readiness: database")
        return "down", "unreachable"
    if pending:
        return "down", f"{len(pending)} migrations not applied"
    return "ok", None


def _redis_state():
    try:
        cache._cache.get_client(write=True).ping()
    except Exception:  # any failure to reach Redis means "down"
        logger.exception("readiness: redis")
        return "down", "unreachable"
    return "ok", None


@require_GET
@never_cache
def readyz(request):
    checks = {}
    for name, probe in (("database", _database_state), ("redis", _redis_state)):
        state, error = probe()
        checks[name] = {"status": state, **({"error": error} if error else {})}
    down = [name for name, check in checks.items() if check["status"] != "ok"]
    body = {"status": "down" if down else "ok", "down": down, "checks": checks}
    return JsonResponse(body, status=503 if down else 200)
