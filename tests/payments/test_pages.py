"""The billing, 3-D Secure and staff pages render (their browser flows: tests/e2e)."""

import pytest

from payments.models import Payment
from tests.payments.conftest import THREE_D_SECURE, book, card_team, key, quote

pytestmark = pytest.mark.django_db


def test_billing_page_shows_mode_and_cards(catalog, alice, client):
    team = card_team(alice)
    client.force_login(alice)
    page = client.get(f"/teams/{team.pk}/billing/")
    assert page.status_code == 200 and "•••• 4242" in page.text
    adding = client.get(f"/teams/{team.pk}/billing/?add=1")
    assert 'id="card-form"' in adding.text and "js.stripe.com/v3/" in adding.text
    assert "127.0.0.1" in adding["Content-Security-Policy"]


def test_three_d_secure_page_and_staff_page(catalog, alice, alice_api, client, staff):
    card_team(alice, THREE_D_SECURE)
    response = book(alice_api, quote(alice_api)["id"], key())
    assert response.status_code == 402
    client.force_login(alice)
    page = client.get(response.json()["complete_url"])
    assert page.status_code == 200 and "authenticate-start" in page.text
    assert Payment.objects.get().idempotency_key in page.text
    client.force_login(staff)
    assert client.get("/payments/").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="").status_code in (200, 401, 403)
