"""24 concurrent bookings over HTTP, all or nothing with their payments: some cards decline,
some invoiced teams are over their limit, and more authorised bookings than there are GPUs
race for them. No team pays for a booking it did not get; no booking exists that was not
authorised (card) or that went over the limit (invoiced)."""

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import httpx
import pytest

from accounts.models import BillingMode, Team, TeamCreditLimit
from accounts.roles import personal_team
from accounts.services.tokens import api_token_create
from invoices.models import Invoice, InvoiceKind
from payments.models import CashEntry, CashKind, Payment, PaymentState
from rentals.models import Allocation
from tests.payments.conftest import DECLINES, VISA, card_team, intent
from tests.support.factories.accounts import UserFactory
from tests.support.races import overlapping_pairs

pytestmark = pytest.mark.django_db(transaction=True)

PAYING, DECLINING, OVER_LIMIT = 16, 4, 4  # 2 H100 each: 20 H100s hold 10 bookings


def test_24_concurrent_bookings_pay_for_exactly_what_they_got(catalog, live_server, pln_rates):
    users = UserFactory.create_batch(24)
    kinds = ["paying"] * PAYING + ["declining"] * DECLINING + ["over_limit"] * OVER_LIMIT
    for user, kind in zip(users, kinds, strict=True):
        if kind == "over_limit":
            team = personal_team(user)
            Team.objects.filter(pk=team.pk).update(billing_mode=BillingMode.INVOICED)
            TeamCreditLimit.objects.create(team=team, currency="USD", amount=Decimal("100.00"))
        else:
            card_team(user, VISA if kind == "paying" else DECLINES)
    tokens = [api_token_create(user=u, name="race") for u in users]
    barrier = threading.Barrier(len(users))

    def attempt(i):
        headers = {"Authorization": f"Bearer {tokens[i]}"}
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=60) as client:
            quote = client.post(
                "/api/v1/quotes/",
                json={"gpu_model": "h100", "gpu_count": 2, "period": "day", "period_count": 1},
            ).json()
            barrier.wait()
            response = client.post(
                "/api/v1/bookings/", json={"quote": quote["id"]},
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )  # fmt: skip
            return kinds[i], response.status_code, response.json().get("code")

    with ThreadPoolExecutor(len(users)) as pool:
        results = list(pool.map(attempt, range(len(users))))

    counts = Counter((kind, status, code) for kind, status, code in results)
    print("race:", dict(counts))
    assert counts[("paying", 201, None)] == 10
    assert counts[("paying", 409, "no_capacity")] == 6
    assert counts[("declining", 402, "payment_declined")] == DECLINING
    assert counts[("over_limit", 402, "credit_limit_exceeded")] == OVER_LIMIT
    assert overlapping_pairs() == 0

    # Every booking was paid, and every payment bought a booking.
    allocations = Allocation.objects.all()
    assert allocations.count() == 10
    captured = Payment.objects.filter(state=PaymentState.CAPTURED)
    assert {p.quote_id for p in captured} == {a.quote_id for a in allocations}
    for payment in Payment.objects.filter(state=PaymentState.CANCELLED):
        assert intent(payment.intent_id).status == "canceled"  # nothing charged
    assert Payment.objects.filter(state=PaymentState.CANCELLED).count() == 6
    assert Payment.objects.filter(state=PaymentState.DECLINED).count() == DECLINING
    received = CashEntry.objects.filter(kind=CashKind.RECEIVED)
    assert received.count() == 10
    gross = sum(i.gross for i in Invoice.objects.filter(kind=InvoiceKind.INVOICE))
    assert sum(e.amount for e in received) == sum(p.amount for p in captured) == gross
