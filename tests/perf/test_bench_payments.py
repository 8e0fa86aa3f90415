"""Card-mode bookings per second over HTTP against localstripe, beside invoiced bookings in
the same run and pgbench's tps on the same PostgreSQL, with where a card booking's time goes
(the processor's authorise and capture round trips, measured alone)."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from payments import processor
from payments.models import Payment, PaymentState
from rentals.services import quote_create
from tests.payments.conftest import card_team
from tests.perf.conftest import book_over_http, fleet, gunicorn, pgbench_tps, report

pytestmark = pytest.mark.django_db(transaction=True)
THREADS, PER_THREAD = 8, 20


def _http_bps(tokens, quotes) -> float:
    with gunicorn(workers=2, threads=4) as url:
        codes, elapsed = book_over_http(url, {t: quotes[t] for t in tokens})
    assert set(codes) == {201}, set(codes)
    return len(codes) / elapsed


def _quotes(users, tokens, days):
    starts_at = timezone.now() + timedelta(days=days)
    return {
        t: [str(quote_create(acting=acting_as(u), gpu_model="h100-sxm", gpu_count=1, period="day",
                             period_count=1, starts_at=starts_at).pk) for _ in range(PER_THREAD)]
        for u, t in zip(users, tokens, strict=True)
    }  # fmt: skip


def _processor_round_trips(n=40) -> dict:
    """Seconds per authorise (create + confirm, manual capture) and per capture, alone."""
    client = processor.client()
    customer = client.v1.customers.create({"description": "bench"})
    method = client.v1.payment_methods.create(
        {
            "type": "card",
            "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2031, "cvc": "123"},
        }
    )
    client.v1.payment_methods.attach(method.id, {"customer": customer.id})
    authorise = capture = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        intent = client.v1.payment_intents.create(
            {"amount": 5760, "currency": "usd", "customer": customer.id, "payment_method": method.id,
             "capture_method": "manual", "confirm": True}
        )  # fmt: skip
        t1 = time.perf_counter()
        client.v1.payment_intents.capture(intent.id)
        t2 = time.perf_counter()
        authorise, capture = authorise + t1 - t0, capture + t2 - t1
    return {"authorise_ms": 1000 * authorise / n, "capture_ms": 1000 * capture / n}


def test_card_bookings_per_second_beside_invoiced(django_user_model, pln_rates):
    if not settings.PAYMENTS["API_BASE"].startswith("http://127.0.0.1"):
        pytest.skip("no localstripe")
    fleet()
    invoiced = [django_user_model.objects.create_user(f"inv{i}") for i in range(THREADS)]
    carded = [django_user_model.objects.create_user(f"card{i}") for i in range(THREADS)]
    for user in carded:
        card_team(user)
    inv_tokens = [api_token_create(user=u, name="bench") for u in invoiced]
    card_tokens = [api_token_create(user=u, name="bench") for u in carded]
    invoiced_bps = _http_bps(inv_tokens, _quotes(invoiced, inv_tokens, 2))
    card_bps = _http_bps(card_tokens, _quotes(carded, card_tokens, 4))
    assert Payment.objects.filter(state=PaymentState.CAPTURED).count() == THREADS * PER_THREAD
    trips = _processor_round_trips()
    tps = pgbench_tps(clients=THREADS)
    report(
        f"card bookings against localstripe ({THREADS} clients, gunicorn 2×4)",
        {
            "invoiced (HTTP)": {
                "bookings_per_s": invoiced_bps,
                "ratio_to_pgbench_tps": invoiced_bps / tps,
            },
            "card (HTTP, localstripe)": {
                "bookings_per_s": card_bps,
                "ratio_to_pgbench_tps": card_bps / tps,
                "ratio_to_invoiced": card_bps / invoiced_bps,
            },
            "processor alone (one client)": trips,
            "pgbench TPC-B (scale 4, 8 clients)": {"tps": tps},
        },
    )
