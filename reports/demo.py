"""The fleet report's part of the demo: its closed steps agree with the demo's past."""

from datetime import datetime

from rentals import demo
from reports.models import AllocatedStep, LedgerDay


def seed_history(*, days: int = 30, now: datetime | None = None) -> bool:
    """`rentals.demo.seed_history`, and where it wrote a past, the fleet report's closed steps
    forgotten: those beat's task closed before that past was written are counted again (and
    closed again on its next run). Back: whether a past was written."""
    if not demo.seed_history(days=days, now=now):
        return False
    AllocatedStep.objects.all().delete()
    LedgerDay.objects.all().delete()
    return True
