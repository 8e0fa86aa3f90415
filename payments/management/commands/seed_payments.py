"""The demo's payments (ANCHORGPU_DEMO): alice's team pays by card with Stripe's test card
4242 saved at the processor (localstripe in `make run`); bob's company team is invoiced."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from accounts.models import BillingMode, Team
from accounts.roles import acting_as, personal_team
from core.db import db_now
from core.errors import DomainError
from payments import processor
from payments.models import Card, ProcessorCustomer
from payments.services import card_save


def _known(card) -> bool:
    try:
        processor.client().v1.payment_methods.retrieve(card.processor_id)
    except Exception:  # unknown there, or the processor is down: save it again
        return False
    return True


class Command(BaseCommand):
    help = "Demo mode: alice pays by card (test card 4242 saved), bob's teams are invoiced."

    def handle(self, *args, **options):
        if not settings.ANCHORGPU["DEMO"]:
            self.stdout.write("no demo payments: ANCHORGPU_DEMO is off")
            return
        users = get_user_model().objects.filter(username__in=["alice", "bob"])
        for user in users:
            team = personal_team(user)
            if user.username == "bob":
                Team.objects.filter(pk=team.pk).update(billing_mode=BillingMode.INVOICED)
                continue
            Team.objects.filter(pk=team.pk).update(billing_mode=BillingMode.CARD)
            card = Card.objects.filter(team=team, removed_at=None, is_default=True).first()
            if card is not None and _known(card):
                continue
            # localstripe keeps nothing across restarts: forget what it no longer knows.
            Card.objects.filter(team=team, removed_at=None).update(
                removed_at=db_now(), is_default=False
            )
            ProcessorCustomer.objects.filter(team=team).delete()
            try:
                method = processor.client().v1.payment_methods.create(
                    {"type": "card", "card": {"number": "4242424242424242", "exp_month": 12,
                                              "exp_year": 2034, "cvc": "123"}}
                )  # fmt: skip
                card_save(acting=acting_as(user), payment_method=method.id)
            except (DomainError, Exception) as exc:  # the processor is optional for the demo
                self.stderr.write(
                    f"alice's test card not saved ({exc}); add one on her billing page"
                )
        self.stdout.write("demo payments ready: alice pays by card, bob is invoiced")
