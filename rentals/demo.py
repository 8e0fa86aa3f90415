"""Demo rentals on top of the demo catalog (catalog/demo.py)."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.access import acting_as
from rentals.models import Allocation
from rentals.services import allocation_book, quote_create


def seed_rentals() -> None:
    """Give alice something to look at: one running allocation and one scheduled."""
    User = get_user_model()
    alice = User.objects.get(username="alice")
    if Allocation.objects.filter(user=alice).exists():
        return
    now = timezone.now()
    running = quote_create(
        acting=acting_as(alice), gpu_model="h100-sxm", gpu_count=4, period="week", period_count=1,
        options=[{"option": "nvme-scratch", "quantity": 2}],
    )  # fmt: skip
    allocation_book(acting=acting_as(alice), quote=running)
    scheduled = quote_create(
        acting=acting_as(alice), gpu_model="l40s", gpu_count=2, period="day", period_count=3,
        starts_at=now + timedelta(days=2),
    )  # fmt: skip
    allocation_book(acting=acting_as(alice), quote=scheduled)
