"""The catalog list (models, prices in force, GPUs free now) as a read model: each answer is
kept in Redis with the catalog version it was built at and the next instant its figures
change by time alone (a holding starting or ending, a scheduled price taking effect).

A cached answer is served only while both hold, so it is never staler than a fresh one:
bookings, cancellations and extensions (rentals services), any catalog row saved or
deleted (catalog.signals) and a capacity refresh that moved a model's rows bump the version
when they commit. Where every model's GPUs free now came from the capacity read model,
those refreshes follow time for it, and the answer is kept only while the oldest of them
is fresh enough to serve."""

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta

from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.utils import timezone

from core.versions import CATALOG, version, version_key
from rentals.selectors.summary import FRESH
from rentals.sql import capacity as capacity_sql

KEEP = timedelta(hours=1)  # the longest a copy is kept even when nothing changes


def _next_change(now: datetime) -> datetime:
    with connection.cursor() as cursor:
        cursor.execute(capacity_sql.CATALOG_SUMMARIES, {"fresh": now - FRESH})
        unkept, oldest = cursor.fetchone()
        if unkept == 0 and oldest is not None:  # every model's from its summary
            cursor.execute(capacity_sql.CATALOG_NEXT_PRICE, {"now": now})
            upcoming = min(cursor.fetchone()[0] or now + KEEP, oldest + FRESH)
        else:
            cursor.execute(capacity_sql.CATALOG_NEXT_CHANGE, {"now": now})
            upcoming = cursor.fetchone()[0]
    return min(upcoming or now + KEEP, now + KEEP)


def catalog_answer(key: str, build: Callable[[], object]) -> tuple[bytes, str]:
    """(JSON body, ETag) for the request `key`: the cached copy while it is current, else
    `build()`'s answer (its data), kept for the next request. One Redis round trip on a
    hit (the version and the copy together)."""
    cache_key = "catalog-list:" + hashlib.sha256(key.encode()).hexdigest()
    found = cache.get_many([version_key(CATALOG), cache_key])
    current = found.get(version_key(CATALOG)) or version(CATALOG)
    entry = found.get(cache_key)
    now = timezone.now()
    if entry and entry["version"] == current and now < entry["until"]:
        return entry["body"], entry["etag"]
    until = _next_change(now)
    body = json.dumps(build(), cls=DjangoJSONEncoder).encode()
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    timeout = max(int((until - now).total_seconds()) + 1, 1)
    cache.set(cache_key, {"version": current, "until": until, "body": body, "etag": etag}, timeout)
    return body, etag
