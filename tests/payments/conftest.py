"""Payments tests run against the real localstripe the launcher starts (STRIPE_API_BASE)."""

import uuid

import pytest
from django.conf import settings

from accounts.models import BillingMode, Team
from accounts.roles import acting_as, personal_team
from payments import processor
from payments.services import card_save

VISA = "4242424242424242"
DECLINES = "4000000000000341"  # attaches, declines at authorisation
THREE_D_SECURE = "4000002500003155"


@pytest.fixture(autouse=True)
def _rates(request):
    """Invoices in USD with Polish VAT need the NBP rate: every payments test has them."""
    if "db" in request.fixturenames or "transactional_db" in request.fixturenames:
        request.getfixturevalue("pln_rates")


@pytest.fixture(autouse=True)
def _processor():
    if not settings.PAYMENTS["API_BASE"].startswith("http://127.0.0.1"):
        pytest.skip("no localstripe (run through the launcher: make test or t.sh)")


def card_token(number: str = VISA) -> str:
    """A PaymentMethod at the processor, as Stripe.js makes one in the browser."""
    method = processor.client().v1.payment_methods.create(
        {
            "type": "card",
            "card": {"number": number, "exp_month": 12, "exp_year": 2031, "cvc": "123"},
        }
    )
    return method.id


def card_team(user, number: str = VISA) -> Team:
    """The user's personal team in card mode with `number` saved as its default card."""
    team = personal_team(user)
    Team.objects.filter(pk=team.pk).update(billing_mode=BillingMode.CARD)
    if number:
        card_save(acting=acting_as(user), payment_method=card_token(number))
    return Team.objects.get(pk=team.pk)


def key() -> str:
    return str(uuid.uuid4())


def quote(client, **changes) -> dict:
    body = {"gpu_model": "h100", "gpu_count": 2, "period": "week", "period_count": 1} | changes
    response = client.post("/api/v1/quotes/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def book(client, quote_id, k=None):
    return client.post(
        "/api/v1/bookings/", {"quote": quote_id}, format="json", HTTP_IDEMPOTENCY_KEY=k or key()
    )


def intent(intent_id):
    return processor.client().v1.payment_intents.retrieve(intent_id)
