"""Webhook endpoints and deliveries: register, change, test; record messages in the
transaction of the change they announce (an outbox); deliver each with retries.

Delivery is at least once: a message's body and `webhook-id` are fixed when it is
recorded, so a receiver that saw it already can tell by the id.
"""

import base64
import logging
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import httpx
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from standardwebhooks.webhooks import Webhook

from accounts.errors import NotAllowed
from accounts.roles import Acting, Action
from core.db import db_now, lease_free
from core.errors import Invalid
from core.publish import publish
from core.sealed import InvalidToken, reseal, seal, unseal
from rentals.services import webhook_disabled_notice_record
from webhooks import messages
from webhooks.models import (
    TEST_EVENT,
    DeliveryStatus,
    EventType,
    WebhookDelivery,
    WebhookEndpoint,
)
from webhooks.urls_safety import url_refusal

logger = logging.getLogger(__name__)

DELIVER_TASK = "webhooks.tasks.webhook_deliver_task"
ENDPOINTS_MAX = 20
USER_AGENT = "AnchorGPU-Webhooks/1.0"
SECRET_LOST = "AnchorGPU cannot unseal this endpoint's signing secret (its server key changed)"


def _timeout() -> float:
    """Seconds a receiver has to answer."""
    seconds: float = settings.ANCHORGPU["WEBHOOK_TIMEOUT"]
    return seconds


def _retry_delays() -> list[float]:
    """Seconds to wait after each failed attempt."""
    delays: list[float] = settings.ANCHORGPU["WEBHOOK_RETRY_DELAYS"]
    return delays


def _disable_after() -> timedelta:
    """How long an endpoint fails before it is disabled."""
    failing: timedelta = settings.ANCHORGPU["WEBHOOK_DISABLE_AFTER"]
    return failing


def _checked(*, url: object, events: object, description: object, errors: dict[str, str]) -> None:
    if not isinstance(url, str) or not url or len(url) > 500:
        errors["url"] = _("Give the receiver's URL (at most 500 characters).")
    elif refusal := url_refusal(url):
        errors["url"] = refusal
    if events is not None:
        known = set(EventType.values)
        if not isinstance(events, list) or not events or not all(e in known for e in events):
            errors["events"] = _("Choose one or more of: %(events)s.") % {
                "events": ", ".join(EventType.values)
            }
    if description is not None and (not isinstance(description, str) or len(description) > 200):
        errors["description"] = _("At most 200 characters.")


def _own(acting: Acting, endpoint: WebhookEndpoint) -> None:
    acting.require(Action.ACT)
    if endpoint.team_id != acting.team.pk:
        raise NotAllowed(_("Only the team that registered an endpoint can change it."))


@transaction.atomic
def endpoint_create(
    *, acting: Acting, url: str, events: list[str], description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """Register a receiver; the signing secret is returned this once."""
    acting.require(Action.ACT)
    errors: dict[str, str] = {}
    _checked(url=url, events=events, description=description, errors=errors)
    if WebhookEndpoint.objects.filter(team=acting.team).count() >= ENDPOINTS_MAX:
        errors["url"] = _("A team has at most %(n)s endpoints.") % {"n": ENDPOINTS_MAX}
    if errors:
        raise Invalid(errors)
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    endpoint = WebhookEndpoint.objects.create(
        team=acting.team, created_by=acting.user, url=url, events=sorted(set(events)),
        description=description, secret_sealed=seal(secret),
    )  # fmt: skip
    return endpoint, secret


@transaction.atomic
def endpoint_update(
    *, acting: Acting, endpoint: WebhookEndpoint, **changes: Any
) -> WebhookEndpoint:
    """Change the URL, events, description, or enable/disable it. Enabling starts afresh:
    no failure history, and nothing from the disabled time is sent."""
    _own(acting, endpoint)
    endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    errors: dict[str, str] = {}
    if "url" in changes or "events" in changes or "description" in changes:
        _checked(
            url=changes.get("url", endpoint.url), events=changes.get("events"),
            description=changes.get("description"), errors=errors,
        )  # fmt: skip
    if errors:
        raise Invalid(errors)
    for field in ("url", "description"):
        if field in changes:
            setattr(endpoint, field, changes[field])
    if "events" in changes:
        endpoint.events = sorted(set(changes["events"]))
    if "is_active" in changes and changes["is_active"] != endpoint.is_active:
        endpoint.is_active = bool(changes["is_active"])
        endpoint.failing_since = None
        endpoint.disabled_at = None if endpoint.is_active else db_now()
        if not endpoint.is_active:
            _abandon_pending(endpoint, _("The endpoint was disabled by its owner."))
    endpoint.save()
    return endpoint


@transaction.atomic
def endpoint_delete(*, acting: Acting, endpoint: WebhookEndpoint) -> None:
    _own(acting, endpoint)
    endpoint.delete()


@transaction.atomic
def endpoint_test(*, acting: Acting, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """Send a `webhook.test` message now (signed and retried like any other)."""
    _own(acting, endpoint)
    if not endpoint.is_active:
        raise Invalid({"is_active": _("Enable the endpoint first.")})
    now = db_now()
    message_id = f"tst_{secrets.token_hex(12)}"
    body = messages.body_text(
        TEST_EVENT, now, {"endpoint": endpoint.pk, "team": endpoint.team_id,
                          "note": "A test event, sent from the account page or the API."},
    )  # fmt: skip
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, message_id=message_id, event_type=TEST_EVENT, payload=body,
        created_at=now, next_attempt_at=now,
    )  # fmt: skip
    transaction.on_commit(lambda: _queue([delivery.pk]))
    return delivery


def _endpoints_listening(team_ids: Iterable[int]) -> dict[int, list[WebhookEndpoint]]:
    by_team: dict[int, list[WebhookEndpoint]] = {}
    for endpoint in WebhookEndpoint.objects.filter(team_id__in=team_ids, is_active=True):
        by_team.setdefault(endpoint.team_id, []).append(endpoint)
    return by_team


def deliveries_record(
    *, team_ids: Iterable[int], build: Callable[..., Iterable[messages.Message]]
) -> int:
    """Record the deliveries of the messages `build(team_ids=…)` makes, to the endpoints
    of those teams (ids, or a query of them) that listen, in the caller's transaction;
    queue them once it commits. One query when no endpoint of these teams is active."""
    endpoints = _endpoints_listening(team_ids)
    if not endpoints:
        return 0
    now = db_now()
    deliveries = [
        WebhookDelivery(
            endpoint=endpoint,
            message_id=message.id,
            event_type=message.type,
            payload=message.body,
            created_at=now,
            next_attempt_at=now,
        )  # fmt: skip
        for message in build(team_ids=set(endpoints))
        for endpoint in endpoints[message.team_id]
        if message.type in endpoint.events
    ]
    created = WebhookDelivery.objects.bulk_create(deliveries)
    ids = [d.pk for d in created]
    if ids:
        transaction.on_commit(lambda: _queue(ids))
    return len(ids)


def _queue(ids: list[int]) -> None:
    """Deliver them soon; what cannot be queued now the due-deliveries sweep sends."""
    publish(DELIVER_TASK, ids)


@dataclass(frozen=True)
class Attempt:
    status: str
    response_code: int | None
    retry_in: float | None  # seconds until the next attempt, None when none is due


@transaction.atomic
def _claim(delivery_id: int, now: datetime) -> WebhookDelivery | None:
    delivery = (
        # Only the delivery's row: its endpoint's is key-share locked by any transaction
        # committing a new delivery to it, which is no reason to skip this one.
        WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("endpoint")
        .filter(pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(lease_free(now))
        .first()
    )
    if delivery is None:
        return None
    if not delivery.endpoint.is_active:
        delivery.status, delivery.last_error = DeliveryStatus.FAILED, "endpoint disabled"
        delivery.next_attempt_at = None
        delivery.save(update_fields=["status", "last_error", "next_attempt_at"])
        return None
    delivery.attempts += 1
    delivery.last_attempt_at = now
    delivery.claimed_until = now + timedelta(seconds=_timeout() + 30)
    delivery.save(update_fields=["attempts", "last_attempt_at", "claimed_until"])
    return delivery


_clients: dict[int, httpx.Client] = {}


def _client() -> httpx.Client:
    """One client per worker process: building one (its TLS context) costs more than a
    delivery. Redirects are not followed: a receiver answers for itself."""
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = httpx.Client(follow_redirects=False)
    return _clients[pid]


def _send(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(HTTP status or None, error text or "") of one POST of the signed body."""
    if refusal := url_refusal(delivery.endpoint.url):
        return None, refusal[:300]
    try:
        secret = unseal(delivery.endpoint.secret_sealed)
    except InvalidToken:
        logger.error(
            "Webhook endpoint %s: its signing secret was sealed under a key that is neither "
            "DJANGO_SECRET_KEY nor in DJANGO_SECRET_KEY_FALLBACKS", delivery.endpoint_id,
        )  # fmt: skip
        return None, SECRET_LOST
    sent_at = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": Webhook(secret).sign(delivery.message_id, sent_at, delivery.payload),
    }
    try:
        response = _client().post(
            delivery.endpoint.url, content=delivery.payload.encode(), headers=headers,
            timeout=_timeout(),
        )  # fmt: skip
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    return response.status_code, f"HTTP {response.status_code}"


def delivery_attempt(*, delivery_id: int) -> Attempt | None:
    """One attempt at a due delivery (None when it is not due, done, or another worker has
    it). A failure schedules the next attempt (WEBHOOK_RETRY_DELAYS, about a day in all);
    an endpoint failing for WEBHOOK_DISABLE_AFTER is disabled and its owner told."""
    delivery = _claim(delivery_id, db_now())
    if delivery is None:
        return None
    code, error = _send(delivery)
    return _attempt_record(delivery, code, error)


@transaction.atomic
def _attempt_record(delivery: WebhookDelivery, code: int | None, error: str) -> Attempt:
    """What one attempt got: done, or the next attempt scheduled, or the endpoint disabled
    after failing for WEBHOOK_DISABLE_AFTER."""
    now = db_now()
    # No key changes: a lock that lets new deliveries to this endpoint commit meanwhile.
    endpoint = WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=delivery.endpoint_id)
    delivery.response_code, delivery.last_error = code, error
    delivery.claimed_until = None
    retry_in = None
    if not error:
        delivery.status, delivery.delivered_at = DeliveryStatus.SUCCEEDED, now
        delivery.next_attempt_at = None
        endpoint.failing_since = None
    else:
        delays = _retry_delays()
        if delivery.attempts > len(delays):
            delivery.status, delivery.next_attempt_at = DeliveryStatus.FAILED, None
        else:
            retry_in = delays[delivery.attempts - 1]
            delivery.next_attempt_at = now + timedelta(seconds=retry_in)
        endpoint.failing_since = endpoint.failing_since or delivery.last_attempt_at
    delivery.save()
    if (
        endpoint.is_active
        and endpoint.failing_since
        and (now - endpoint.failing_since >= _disable_after())
    ):
        _disable(endpoint, now)
        retry_in = None
    endpoint.save(update_fields=["failing_since", "is_active", "disabled_at"])
    return Attempt(delivery.status, code, retry_in)


def _abandon_pending(endpoint: WebhookEndpoint, reason: str) -> None:
    WebhookDelivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.FAILED, next_attempt_at=None, last_error=reason[:300]
    )


def _disable(endpoint: WebhookEndpoint, now: datetime) -> None:
    endpoint.is_active, endpoint.disabled_at = False, now
    _abandon_pending(endpoint, _("The endpoint was disabled after failing for a day."))
    webhook_disabled_notice_record(user=endpoint.created_by, url=endpoint.url, at=now)


def secrets_reseal() -> tuple[int, int]:
    """Seal every endpoint's secret under the current SECRET_KEY, so a key kept in
    SECRET_KEY_FALLBACKS after a rotation can be dropped: (resealed, not openable)."""
    resealed, lost = 0, 0
    for pk in WebhookEndpoint.objects.values_list("pk", flat=True):
        if _secret_reseal(pk):
            resealed += 1
        else:
            lost += 1
    return resealed, lost


@transaction.atomic
def _secret_reseal(pk: UUID) -> bool:
    """One endpoint's secret sealed again, in a transaction of its own (False: it cannot be
    unsealed with any key this server has)."""
    endpoint = WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=pk)
    try:
        endpoint.secret_sealed = reseal(endpoint.secret_sealed)
    except InvalidToken:
        return False
    endpoint.save(update_fields=["secret_sealed"])
    return True


def deliveries_due(*, limit: int = 500) -> list[int]:
    """Deliveries whose next attempt is due and that no worker holds: the retries too far
    ahead for a broker countdown, and any queueing lost with a broker outage."""
    now = db_now()
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(lease_free(now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )


def deliveries_due_queue() -> int:
    ids = deliveries_due()
    _queue(ids)
    return len(ids)
