"""Idempotency keys for purchases (reliability.md §1.3).

The first response to (user, key) is stored in the same transaction as the purchase and
replayed for retries of the same request. A transaction-scoped advisory lock tells a
concurrent duplicate apart (409) without blocking it.
"""

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.errors import Conflict, DomainError
from rentals.models import IdempotencyKey


class KeyMissing(DomainError):
    code = "idempotency_key_missing"
    title = _("Idempotency-Key header required")


class KeyMalformed(DomainError):
    code = "idempotency_key_malformed"
    title = _("Malformed Idempotency-Key header")


class KeyReused(DomainError):
    status = 422
    code = "idempotency_key_reused"
    title = _("Idempotency-Key reused with a different request")


class KeyInFlight(Conflict):
    code = "in_flight"
    title = _("A request with this Idempotency-Key is still being processed")


@dataclass
class Outcome:
    status: int
    body: dict
    replayed: bool


def idempotency_key_parse(raw: str | None) -> str:
    """A UUID, bare or as an RFC 8941 sf-string ("…")."""
    if raw is None or not raw.strip():
        raise KeyMissing(_("Send an Idempotency-Key header (a UUID) with every purchase."))
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if len(value) > 255:
        raise KeyMalformed(_("The Idempotency-Key is longer than 255 characters."))
    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise KeyMalformed(_("The Idempotency-Key must be a UUID.")) from exc


def request_fingerprint(*, method: str, path: str, data) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()


@transaction.atomic
def idempotent_call(
    *, user, key: str, fingerprint: str, handler: Callable[[], tuple[int, dict]]
) -> Outcome:
    """Run `handler` once per (user, key); later calls with the same request replay it.

    `handler` returns (status, body) for results worth replaying (successes and business
    refusals); it raises for input errors, which are not stored, so a corrected retry works.
    """
    retention = settings.ANCHORGPU["IDEMPOTENCY_RETENTION"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", [f"idem:{user.pk}:{key}"]
        )
        if not cursor.fetchone()[0]:
            raise KeyInFlight(_("The first request with this key is still running; retry shortly."))
    now = timezone.now()
    stored = IdempotencyKey.objects.filter(user=user, key=key).first()
    if stored is not None and stored.created_at <= now - retention:
        stored.delete()
        stored = None
    if stored is not None:
        if stored.fingerprint != fingerprint:
            raise KeyReused(
                _("This Idempotency-Key was used for a different request; use a new key.")
            )
        return Outcome(stored.status_code, stored.body, True)
    status, body = handler()
    IdempotencyKey.objects.create(
        user=user, key=key, fingerprint=fingerprint, status_code=status, body=body, created_at=now
    )
    return Outcome(status, body, False)


def idempotency_keys_purge(*, now: datetime | None = None) -> int:
    now = now or timezone.now()
    cutoff = now - settings.ANCHORGPU["IDEMPOTENCY_RETENTION"]
    deleted, _ = IdempotencyKey.objects.filter(created_at__lte=cutoff).delete()
    return deleted
