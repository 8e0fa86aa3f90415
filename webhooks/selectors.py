"""Reads of webhooks: a team's endpoints and an endpoint's delivery log."""

from django.core.cache import cache
from django.db.models import QuerySet

from accounts.access import Acting, Action
from core.versions import WEBHOOK_TEAMS, version, version_key
from webhooks.models import WebhookDelivery, WebhookEndpoint


def endpoint_list(*, acting: Acting) -> QuerySet[WebhookEndpoint]:
    acting.require(Action.READ)
    return WebhookEndpoint.objects.filter(team=acting.team)


def endpoint_get(*, acting: Acting, pk) -> WebhookEndpoint | None:
    return endpoint_list(acting=acting).filter(pk=pk).first()


def delivery_log(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint=endpoint).order_by("-created_at", "-id")


def teams_listening() -> frozenset[int]:
    """Ids of the teams with an active endpoint, from a copy in Redis kept with the version
    it was built at (any endpoint saved or deleted bumps it): a booking of a team with no
    endpoint then records its events without a query for endpoints."""
    found = cache.get_many([version_key(WEBHOOK_TEAMS), WEBHOOK_TEAMS])
    current = found.get(version_key(WEBHOOK_TEAMS)) or version(WEBHOOK_TEAMS)
    entry = found.get(WEBHOOK_TEAMS)
    if entry is not None and entry[0] == current:
        return entry[1]
    teams = frozenset(
        WebhookEndpoint.objects.filter(is_active=True).values_list("team_id", flat=True)
    )
    cache.set(WEBHOOK_TEAMS, (current, teams), timeout=3600)
    return teams
