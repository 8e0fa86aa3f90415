"""Idempotent purchases (reliability.md §1.3), one layer for the API and the pages alike.

The first response to (team, key), as the client saw it (status, content type, location
and body), is stored in the same transaction as the purchase and replayed byte for byte
with `Idempotent-Replayed: true`: a refused purchase is refused again the same way. Input
errors are not stored, so a corrected retry works. A transaction-scoped advisory lock
tells a concurrent duplicate apart (409) without blocking it.
"""

import functools
import hashlib
import json
import time
import uuid
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.http import HttpResponse
from django.utils.translation import gettext as _
from rest_framework.views import APIView

from accounts.roles import Acting, acting_for_request
from core.db import Retry, db_now, retried_transaction
from core.errors import DomainError, Invalid
from rentals.errors import KeyInFlight, KeyMalformed, KeyMissing, KeyReused
from rentals.models import IdempotencyKey
from rentals.purchase_hooks import purchase_authorise, purchase_settle
from rentals.sql import idempotency as idempotency_sql

REPLAYED = "Idempotent-Replayed"
FORM_FIELD = "idempotency_key"


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


def _replay(stored: IdempotencyKey) -> HttpResponse:
    response = HttpResponse(
        bytes(stored.body), status=stored.status_code, content_type=stored.content_type
    )
    if stored.location:
        response["Location"] = stored.location
    response[REPLAYED] = "true"
    return response


@retried_transaction
def respond_once(*, acting: Acting, key: str, fingerprint: str, respond) -> HttpResponse:
    """The stored answer to (team, key), or `respond()`'s, stored: members of one team
    share keys, so two of them retrying the same purchase buy once."""
    team = acting.team
    with connection.cursor() as cursor:
        cursor.execute(
            idempotency_sql.IDEMPOTENCY_LOOK_UP,
            {"lock": f"idem:{team.pk}:{key}", "team": team.pk, "key": key},
        )
        locked, now, *row = cursor.fetchone()  # now: the database's clock (core.db)
    if not locked:
        raise _in_flight()
    stored = None
    if row[0] is not None:
        pk, stored_fingerprint, created_at, status_code, content_type, location, body = row
        stored = IdempotencyKey(
            id=pk, team=team, key=key, fingerprint=stored_fingerprint, created_at=created_at,
            status_code=status_code, content_type=content_type, location=location, body=body,
        )  # fmt: skip
    if (
        stored is not None
        and stored.created_at <= now - settings.ANCHORGPU["IDEMPOTENCY_RETENTION"]
    ):
        IdempotencyKey.objects.filter(pk=stored.pk).delete()
        stored = None
    if stored is not None:
        if stored.fingerprint != fingerprint:
            raise KeyReused(
                _("This Idempotency-Key was used for a different request; use a new key.")
            )
        return _replay(stored)
    response = respond()
    if hasattr(response, "render") and not response.is_rendered:
        response.render()
    with connection.cursor() as cursor:
        cursor.execute(
            idempotency_sql.IDEMPOTENCY_CLAIM,
            {
                "team": team.pk, "user": acting.user.pk, "key": key,
                "fingerprint": fingerprint,
                "status_code": response.status_code,
                "content_type": response.get("Content-Type", ""),
                "location": response.get("Location", ""), "body": response.content,
                "created_at": now,
            },
        )  # fmt: skip
        if cursor.fetchone() is None:  # the first request's row: run again to replay it
            raise Retry(_in_flight())
    return response


# A page waits up to PAGE_IN_FLIGHT_WAITS × PAGE_IN_FLIGHT_PAUSE seconds for the first
# request with its key before it says the purchase is being processed.
PAGE_IN_FLIGHT_WAITS, PAGE_IN_FLIGHT_PAUSE = 20, 0.25


def _in_flight() -> KeyInFlight:
    return KeyInFlight(_("The first request with this key is still running; retry shortly."))


def idempotent(view=None, *, refused=None, purchase=False):
    """Make a purchase view answer once per (team, key): an API view's method or a page view.

    The API takes the key from the `Idempotency-Key` header and answers refusals as problem
    details (DRF's exception handler). A page takes it from the form's `idempotency_key`
    field; the page view turns its own refusals into the page the customer sees, and
    `refused(request, exc, **kwargs)` answers the layer's (a bad key, a duplicate in flight).

    `purchase`: the request buys a quote (rentals.purchase_hooks): True for the body's
    `quote`, or a function of (data, kwargs) that names it: a card team's gross is
    authorised before the transaction (outside any lock), handed to the view as
    `request.purchase_payment`, and captured or cancelled once the answer is stored.
    """
    if view is None:
        return functools.partial(idempotent, refused=refused, purchase=purchase)

    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        # A page's duplicate in flight is a double click: wait a moment for the first to
        # finish and show what it did. The API answers 409 at once (the client retries).
        waits = 0 if isinstance(args[0], APIView) else PAGE_IN_FLIGHT_WAITS
        while True:
            try:
                return _answer(view, args, kwargs, purchase)
            except KeyInFlight as exc:
                if waits > 0:
                    waits -= 1
                    time.sleep(PAGE_IN_FLIGHT_PAUSE)
                    continue
                if refused is None:
                    raise
                return refused(args[0], exc, **kwargs)
            except DomainError as exc:
                if refused is None:
                    raise
                return refused(args[0], exc, **kwargs)

    return wrapper


def _answer(view, args, kwargs, purchase=False):
    """Key, fingerprint, the purchase's payment, then the stored answer or a new one."""
    api = args[0] if isinstance(args[0], APIView) else None
    request = args[1] if api else args[0]
    if api:
        raw_key = request.headers.get("Idempotency-Key")
        data = request.data
    else:
        raw_key = request.POST.get(FORM_FIELD)
        data = {
            k: v for k, v in request.POST.items() if k not in (FORM_FIELD, "csrfmiddlewaretoken")
        }
    key = idempotency_key_parse(raw_key)
    fingerprint = request_fingerprint(method=request.method, path=request.path, data=data)

    def respond(refusal=None):
        if refusal is not None:
            return _finalized(api, request, api.handle_exception(refusal))
        try:
            return _finalized(api, request, view(*args, **kwargs))
        except DomainError as exc:
            if api is None or isinstance(exc, Invalid):
                raise  # input that does not validate is the request's, not the key's: not kept
            return _finalized(api, request, api.handle_exception(exc))

    acting = acting_for_request(request)
    payment = None
    if purchase:
        try:
            quote_id = (
                purchase(data, kwargs)
                if callable(purchase)
                else data.get("quote")
                if isinstance(data, dict)
                else None
            )
            payment = purchase_authorise(acting=acting, quote_id=quote_id, key=key)
        except DomainError as exc:
            if api is None or not getattr(exc, "final", False):
                raise  # not final (3-D Secure asked for): nothing stored, the key stays open
            return respond_once(
                acting=acting, key=key, fingerprint=fingerprint,
                respond=functools.partial(respond, refusal=exc),
            )  # fmt: skip
        request.purchase_payment = payment
    settle = True
    try:
        return respond_once(acting=acting, key=key, fingerprint=fingerprint, respond=respond)
    except KeyInFlight:
        settle = False  # the first request settles its own payment
        raise
    except DomainError as exc:
        if api is None or isinstance(exc, (KeyInFlight, KeyReused, Invalid)):
            raise
        # A race lost on every retry surfaces here, after the transaction: store that
        # refusal too, so a retry with this key is refused the same way.
        return respond_once(
            acting=acting,
            key=key,
            fingerprint=fingerprint,
            respond=functools.partial(respond, refusal=exc),
        )
    finally:
        if settle:
            purchase_settle(payment=payment)  # after the commit: capture, or cancel


def _finalized(api, request, response):
    return api.finalize_response(request, response) if api else response


def idempotency_keys_purge(*, now: datetime | None = None) -> int:
    cutoff = (now or db_now()) - settings.ANCHORGPU["IDEMPOTENCY_RETENTION"]
    deleted, _counts = IdempotencyKey.objects.filter(created_at__lte=cutoff).delete()
    return deleted
