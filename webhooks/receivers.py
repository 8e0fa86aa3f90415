"""The rentals layer's signals, turned into webhook deliveries in the same transaction."""

from django.dispatch import receiver

from rentals.models import Allocation
from rentals.signals import allocation_events_recorded, allocation_notices_recorded
from webhooks import messages
from webhooks.services import deliveries_record


@receiver(allocation_events_recorded)
def _allocation_events(sender, event_ids, **kwargs):
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
