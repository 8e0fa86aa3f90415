"""Reads of webhooks: a team's endpoints and an endpoint's delivery log."""

from uuid import UUID

from django.db.models import QuerySet

from accounts.roles import Acting, Action
from core.versions import WEBHOOK_TEAMS, versioned_copy
from webhooks.models import WebhookDelivery, WebhookEndpoint


def endpoint_list(*, acting: Acting) -> QuerySet[WebhookEndpoint]:
    acting.require(Action.READ)
    return WebhookEndpoint.objects.filter(team=acting.team)


def endpoint_get(*, acting: Acting, pk: UUID | str) -> WebhookEndpoint | None:
    return endpoint_list(acting=acting).filter(pk=pk).first()


def delivery_log(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint=endpoint).order_by("-created_at", "-id")


def teams_listening() -> frozenset[int]:
    """Ids of the teams with an active endpoint, from a copy in Redis that any endpoint
    saved or deleted invalidates (webhooks.receivers): a booking of a team with no endpoint
    then records its events without a query for endpoints."""
    return versioned_copy(
        WEBHOOK_TEAMS,
        lambda: frozenset(
            WebhookEndpoint.objects.filter(is_active=True).values_list("team_id", flat=True)
        ),
    )
