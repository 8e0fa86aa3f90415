"""Reads of webhooks: a team's endpoints and an endpoint's delivery log."""

from django.db.models import QuerySet

from accounts.access import Acting, Action
from webhooks.models import WebhookDelivery, WebhookEndpoint


def endpoint_list(*, acting: Acting) -> QuerySet[WebhookEndpoint]:
    acting.require(Action.READ)
    return WebhookEndpoint.objects.filter(team=acting.team)


def endpoint_get(*, acting: Acting, pk) -> WebhookEndpoint | None:
    return endpoint_list(acting=acting).filter(pk=pk).first()


def delivery_log(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint=endpoint).order_by("-created_at", "-id")
