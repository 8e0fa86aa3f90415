"""Version counters in the shared cache (Redis) for read models: a cached answer names the
version it was built at, and every change that could alter it bumps the version after its
transaction commits, so no server answers from a stale copy once the change is visible."""

from django.core.cache import cache
from django.db import transaction

CATALOG = "catalog"  # the GPU model list with prices and free GPUs now
CATALOG_ROWS = "catalog-rows"  # models, periods and node sizes: changed by catalog rows only
WEBHOOK_TEAMS = "webhook-teams"  # the teams with an active webhook endpoint


def version_key(name: str) -> str:
    return f"version:{name}"


def version(name: str) -> int:
    current = cache.get(version_key(name))
    if current is None:
        cache.add(version_key(name), 1, timeout=None)
        current = cache.get(version_key(name), 1)
    return current


def bump(name: str, *, now: bool = False) -> None:
    """Bump `name` once the current transaction commits (at once outside one). With `now`,
    also at once: a copy rebuilt before the commit (from the old rows) is dropped by the
    second bump, and meanwhile no copy older than the change is served."""

    def _bump():
        cache.add(version_key(name), 1, timeout=None)
        cache.incr(version_key(name))

    if now:
        _bump()
    transaction.on_commit(_bump)
