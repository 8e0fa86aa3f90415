"""Version counters in the shared cache (Redis) for read models: a cached answer names the
version it was built at, and every change that could alter it bumps the version after its
transaction commits, so no server answers from a stale copy once the change is visible."""

from collections.abc import Callable
from typing import TypeVar, cast

from django.core.cache import cache as default_cache
from django.db import transaction

from core.cache import RedisCache, on_recovery

T = TypeVar("T")
cache = cast(RedisCache, default_cache)  # settings.CACHES: the default cache is core.cache's

CATALOG = "catalog"  # the GPU model list with prices and free GPUs now
CATALOG_ROWS = "catalog-rows"  # models, periods and node sizes: changed by catalog rows only
WEBHOOK_TEAMS = "webhook-teams"  # the teams with an active webhook endpoint
ALL = (CATALOG, CATALOG_ROWS, WEBHOOK_TEAMS)


def version_key(name: str) -> str:
    return f"version:{name}"


def version(name: str) -> int:
    current: int | None = cache.get(version_key(name))
    if current is None:
        cache.add(version_key(name), 1, timeout=None)
        added: int = cache.get(version_key(name), 1)
        return added
    return current


def bump(name: str, *, now: bool = False) -> None:
    """Bump `name` once the current transaction commits (at once outside one). With `now`,
    also at once: a copy rebuilt before the commit (from the old rows) is dropped by the
    second bump, and meanwhile no copy older than the change is served."""

    def _bump() -> None:
        cache.incr_from_zero(version_key(name))

    if now:
        _bump()
    transaction.on_commit(_bump)


def _bump_all() -> None:
    """Back from a Redis outage, a bump lost meanwhile could leave a copy from before a
    change looking current: every version moves on, so none is served."""
    for name in ALL:
        cache.incr_from_zero(version_key(name))


on_recovery(_bump_all)


def versioned_copy(name: str, build: Callable[[], T], *, timeout: int = 3600) -> T:
    """`build()`'s value, kept in the cache under `name` with the version of `name` it was
    built at and served while that version is current (one round trip on a hit). A copy
    built while a change was committing is dropped by the change's bump on commit."""
    found = cache.get_many([version_key(name), name])
    current = found.get(version_key(name)) or version(name)
    entry = found.get(name)
    if entry is not None and entry[0] == current:
        kept: T = entry[1]
        return kept
    value = build()
    cache.set(name, (current, value), timeout=timeout)
    return value
