"""The account's webhooks page."""

import pytest

from core.sealed import unseal
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def allow_loopback(settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}


def test_register_see_the_secret_once_test_disable_and_remove(alice, client, allow_loopback):
    client.force_login(alice)
    answer = client.post(
        "/account/webhooks/",
        {"url": "http://127.0.0.1:9/in", "events": ["booking.created", "allocation.expired"]},
    )
    assert (answer.status_code, answer["Location"]) == (302, "/account/webhooks/")  # PRG
    page = client.get("/account/webhooks/")
    endpoint = WebhookEndpoint.objects.get()
    secret = unseal(endpoint.secret_sealed)
    assert page.status_code == 200 and secret in page.content.decode()
    assert endpoint.events == ["allocation.expired", "booking.created"]
    assert secret not in client.get("/account/webhooks/").content.decode()

    client.post("/account/webhooks/", {"action": "test", "endpoint": endpoint.pk})
    delivery = WebhookDelivery.objects.get()
    assert (delivery.event_type, delivery.status) == ("webhook.test", DeliveryStatus.PENDING)
    assert delivery.message_id in client.get("/account/webhooks/").content.decode()

    client.post("/account/webhooks/", {"action": "disable", "endpoint": endpoint.pk})
    endpoint.refresh_from_db()
    delivery.refresh_from_db()
    assert not endpoint.is_active and delivery.status == DeliveryStatus.FAILED
    client.post("/account/webhooks/", {"action": "enable", "endpoint": endpoint.pk})
    assert WebhookEndpoint.objects.get().is_active
    client.post("/account/webhooks/", {"action": "delete", "endpoint": endpoint.pk})
    assert not WebhookEndpoint.objects.exists()


def test_a_private_url_is_refused_on_the_page(alice, client):
    client.force_login(alice)
    page = client.post(
        "/account/webhooks/", {"url": "https://10.0.0.8/in", "events": ["booking.created"]}
    )
    assert page.status_code == 400 and "private" in page.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_another_teams_endpoint_cannot_be_touched(alice, bob, client, allow_loopback):
    client.force_login(alice)
    client.post(
        "/account/webhooks/", {"url": "http://127.0.0.1:9/in", "events": ["booking.created"]}
    )
    endpoint = WebhookEndpoint.objects.get()
    client.force_login(bob)
    assert endpoint.url not in client.get("/account/webhooks/").content.decode()
    client.post("/account/webhooks/", {"action": "delete", "endpoint": endpoint.pk})
    assert WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
