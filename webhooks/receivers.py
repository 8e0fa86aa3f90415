"""The rentals layer's signals, turned into webhook deliveries in the same transaction; and
any endpoint saved or deleted, telling `teams_listening`'s copy it is out of date."""

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from core.versions import WEBHOOK_TEAMS, bump
from rentals.models import Allocation
from rentals.signals import allocation_events_recorded, allocation_notices_recorded
from webhooks import messages
from webhooks.models import WebhookEndpoint
from webhooks.selectors import teams_listening
from webhooks.services import deliveries_record


@receiver(post_save, sender=WebhookEndpoint)
@receiver(post_delete, sender=WebhookEndpoint)
def _endpoint_changed(sender, **kwargs):
    bump(WEBHOOK_TEAMS, now=True)


@receiver(allocation_events_recorded)
def _allocation_events(sender, event_ids, team_ids=None, **kwargs):
    if team_ids is not None and not teams_listening() & set(team_ids):
        return  # none of these teams has an endpoint: nothing to record
    teams = Allocation.objects.filter(events__in=event_ids).values("team_id")
    deliveries_record(
        team_ids=teams,
        build=lambda team_ids: messages.from_events(event_ids, team_ids=team_ids),
    )


@receiver(allocation_notices_recorded)
def _expiry_notices(sender, notice_ids, **kwargs):
    teams = Allocation.objects.filter(notices__in=notice_ids).values("team_id")
    deliveries_record(
        team_ids=teams,
        build=lambda team_ids: messages.from_notices(notice_ids, team_ids=team_ids),
    )
