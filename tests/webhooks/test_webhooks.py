"""Webhooks end to end: a real receiver on loopback, a real Celery worker, the Standard
Webhooks library's verifier."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from standardwebhooks.webhooks import Webhook

from accounts.roles import acting_as
from rentals.models import Notice, NoticeKind
from rentals.services import (
    allocation_extend,
    allocation_start,
    allocation_stop,
    allocations_enforce,
    expiry_notices_record,
)
from tests.support.booking import book, end_paid_periods_a_minute_ago
from tests.support.receiver import Receiver
from tests.support.transactions import held_open
from tests.support.waiting import wait_for
from webhooks.models import DeliveryStatus, EventType, WebhookDelivery, WebhookEndpoint
from webhooks.selectors import teams_listening
from webhooks.services import delivery_attempt, endpoint_create, endpoint_update

ALL_EVENTS = list(EventType.values)


@pytest.fixture
def loopback(settings):
    """Test settings allow loopback receivers over http, and retry within seconds."""
    settings.ANCHORGPU = {
        **settings.ANCHORGPU,
        "WEBHOOK_ALLOW_PRIVATE_URLS": True,
        "WEBHOOK_RETRY_DELAYS": [0.2, 0.2, 0.2],
        "WEBHOOK_TIMEOUT": 5.0,
    }


def _verified(secret, headers, body):
    return Webhook(secret).verify(body, headers)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_bookings_life_arrives_signed_and_in_order(catalog, alice, alice_api, loopback, worker):
    with Receiver() as receiver:
        created = alice_api.post(
            "/api/v1/webhooks/endpoints/", {"url": receiver.url, "events": ALL_EVENTS},
            format="json",
        )  # fmt: skip
        assert created.status_code == 201, created.content
        secret = created.json()["secret"]
        assert "secret" not in alice_api.get("/api/v1/webhooks/endpoints/").json()["results"][0]

        acting = acting_as(alice)
        allocation = book(alice, model="l4", count=2, period="day")
        allocation_stop(acting=acting, allocation=allocation)
        allocation_start(acting=acting, allocation=allocation)
        allocation_extend(acting=acting, allocation=allocation, period_count=1)
        allocation.refresh_from_db()
        expiry_notices_record(now=allocation.paid_until - timedelta(minutes=30))
        end_paid_periods_a_minute_ago()
        allocations_enforce()

        expected = [
            "booking.created", "allocation.started", "allocation.stopped",
            "allocation.started", "allocation.extended", "allocation.expiring",
            "allocation.expiring", "allocation.expired",
        ]  # fmt: skip
        assert wait_for(lambda: len(receiver.accepted()) == len(expected)), receiver.requests
        bodies = [_verified(secret, h, b) for h, b in receiver.accepted()]
    assert [b["type"] for b in bodies] == expected
    assert {b["data"].get("booking") or b["data"]["allocation"]["id"] for b in bodies} == {
        str(allocation.pk)
    }
    assert bodies[0]["data"]["amount"] and bodies[0]["data"]["allocations"] == [str(allocation.pk)]
    # a two-day rental half an hour before its end: both warnings are due
    assert [bodies[5]["data"]["within"], bodies[6]["data"]["within"]] == ["24h", "1h"]
    assert bodies[7]["data"]["allocation"]["state"] == "expired"
    assert len({h["webhook-id"] for h, _b in receiver.accepted()}) == len(expected)
    # The worker records a delivery after the receiver has answered it: the last may still
    # be on its way to the log when the receiver holds all eight.
    url = f"/api/v1/webhooks/endpoints/{created.json()['id']}/deliveries/"

    def log():
        return alice_api.get(url).json()["results"]

    assert wait_for(lambda: {d["status"] for d in log()} == {"succeeded"}), log()
    assert len(log()) == len(expected)
    assert {d["response_code"] for d in log()} == {200}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_receiver_failing_twice_gets_the_event_once_with_one_webhook_id(
    catalog, alice, alice_api, loopback, worker
):
    with Receiver(statuses=[500, 503]) as receiver:
        endpoint = alice_api.post(
            "/api/v1/webhooks/endpoints/", {"url": receiver.url, "events": ["booking.created"]},
            format="json",
        ).json()  # fmt: skip
        sent = alice_api.post(f"/api/v1/webhooks/endpoints/{endpoint['id']}/test/")
        assert sent.status_code == 202 and sent.json()["event_type"] == "webhook.test"
        assert wait_for(lambda: len(receiver.accepted()) == 1)
        assert wait_for(lambda: WebhookDelivery.objects.get().status == DeliveryStatus.SUCCEEDED)
    ids = [h["webhook-id"] for h, _body, _status in receiver.requests]
    bodies = {body for _h, body, _status in receiver.requests}
    assert [status for *_rest, status in receiver.requests] == [500, 503, 200]
    assert len(set(ids)) == 1 and ids[0] == sent.json()["webhook_id"] and len(bodies) == 1
    headers, body = receiver.accepted()[0]
    assert _verified(endpoint["secret"], headers, body)["type"] == "webhook.test"
    delivery = alice_api.get(f"/api/v1/webhooks/endpoints/{endpoint['id']}/deliveries/").json()
    assert delivery["results"][0] | {"attempts": 3, "response_code": 200, "status": "succeeded"} == delivery["results"][0]  # fmt: skip
    assert WebhookEndpoint.objects.get().failing_since is None


@pytest.mark.django_db
def test_private_and_plain_http_urls_are_refused(catalog, alice, alice_api):
    for url in (
        "https://127.0.0.1/hooks", "https://10.1.2.3/hooks", "https://169.254.169.254/latest",
        "https://[::1]/hooks", "https://192.168.0.10/hooks", "http://93.184.215.14/hooks",
        "https://user:pw@93.184.215.14/hooks", "ftp://93.184.215.14/",
    ):  # fmt: skip
        response = alice_api.post(
            "/api/v1/webhooks/endpoints/", {"url": url, "events": ["booking.created"]},
            format="json",
        )  # fmt: skip
        assert response.status_code == 400, url
        assert "url" in response.json()["errors"], url
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_url_that_turns_private_is_refused_again_at_delivery(catalog, alice, settings, loopback):
    with Receiver() as receiver:
        endpoint, _secret = endpoint_create(
            acting=acting_as(alice), url=receiver.url, events=["booking.created"]
        )
        book(alice, model="l4", count=1, period="day")
        settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": False}
        attempt = delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)
    assert attempt.status == DeliveryStatus.PENDING and attempt.response_code is None
    assert receiver.requests == []
    assert "http" in WebhookDelivery.objects.get().last_error


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_failing_for_a_day_is_disabled_with_a_console_notice(catalog, alice, loopback):
    with Receiver(statuses=[500] * 10) as receiver:
        endpoint, _secret = endpoint_create(
            acting=acting_as(alice), url=receiver.url, events=["booking.created"]
        )
        book(alice, model="l4", count=1, period="day")
        book(alice, model="l4", count=1, period="day")
        first, second = WebhookDelivery.objects.order_by("id")
        assert delivery_attempt(delivery_id=first.pk).retry_in == 0.2
        endpoint.refresh_from_db()
        assert endpoint.is_active and endpoint.failing_since is not None
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            failing_since=endpoint.failing_since - timedelta(hours=25)
        )
        WebhookDelivery.objects.filter(pk=first.pk).update(next_attempt_at=first.created_at)
        attempt = delivery_attempt(delivery_id=first.pk)
    endpoint.refresh_from_db()
    assert not endpoint.is_active and endpoint.disabled_at is not None
    assert attempt.retry_in is None
    second.refresh_from_db()
    assert second.status == DeliveryStatus.FAILED  # nothing more goes to a disabled endpoint
    notice = Notice.objects.get(kind=NoticeKind.WEBHOOK_DISABLED)
    assert notice.user == alice and notice.endpoint_url == receiver.url
    assert len(receiver.requests) == 2


@pytest.mark.django_db(transaction=True)
def test_a_delivery_goes_while_the_team_records_more_events(catalog, alice, loopback):
    """A transaction recording a delivery takes a key-share lock on its endpoint (the foreign
    key's check, deferred to its commit; made immediate here to hold the lock open): an
    attempt at an earlier delivery of that endpoint meanwhile must not take that for
    "another worker has it" and drop the delivery."""
    with Receiver() as receiver:
        endpoint_create(acting=acting_as(alice), url=receiver.url, events=["booking.created"])
        book(alice, model="l4", count=1, period="day")
        first = WebhookDelivery.objects.get()

        def record_another():
            connection.cursor().execute("SET CONSTRAINTS ALL IMMEDIATE")
            book(alice, model="l4", count=1, period="day")

        with held_open(record_another):
            attempt = delivery_attempt(delivery_id=first.pk)
    assert attempt is not None and attempt.status == DeliveryStatus.SUCCEEDED
    assert len(receiver.accepted()) == 1


@pytest.mark.django_db
def test_only_the_owning_teams_endpoints_hear_and_only_what_they_chose(
    catalog, alice, bob, loopback
):
    mine, _ = endpoint_create(
        acting=acting_as(alice), url="http://127.0.0.1:9/a", events=["allocation.stopped"]
    )
    endpoint_create(acting=acting_as(bob), url="http://127.0.0.1:9/b", events=ALL_EVENTS)
    allocation = book(alice, model="l4", count=1, period="day")
    assert not WebhookDelivery.objects.exists()  # alice's endpoint did not ask for these
    allocation_stop(acting=acting_as(alice), allocation=allocation)
    delivery = WebhookDelivery.objects.get()
    assert delivery.endpoint == mine and delivery.event_type == "allocation.stopped"
    assert json.loads(delivery.payload)["data"]["allocation"]["state"] == "stopped"


@pytest.mark.django_db
def test_a_cluster_booking_is_one_booking_created_and_a_start_per_node(catalog, alice, loopback):
    from rentals.services import allocation_book, quote_create

    endpoint_create(acting=acting_as(alice), url="http://127.0.0.1:9/a", events=ALL_EVENTS)
    acting = acting_as(alice)
    quote = quote_create(
        acting=acting, gpu_model="h100", node_count=2, period="day", period_count=1
    )
    lead = allocation_book(acting=acting, quote=quote)
    types = list(WebhookDelivery.objects.order_by("id").values_list("event_type", flat=True))
    assert types == ["booking.created", "allocation.started", "allocation.started"]
    booking = json.loads(WebhookDelivery.objects.get(event_type="booking.created").payload)
    assert booking["data"]["cluster"] == str(lead.cluster_id)
    assert len(booking["data"]["allocations"]) == 2 and booking["data"]["node_count"] == 2


@pytest.mark.django_db
def test_a_rolled_back_change_announces_nothing(catalog, alice, loopback):
    endpoint_create(acting=acting_as(alice), url="http://127.0.0.1:9/a", events=ALL_EVENTS)
    with pytest.raises(RuntimeError), transaction.atomic():
        book(alice, model="l4", count=1, period="day")
        assert WebhookDelivery.objects.count() == 2
        raise RuntimeError("the booking's transaction fails after the events")
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_the_teams_with_an_endpoint_are_kept_in_the_cache_and_follow_every_change(
    catalog, alice, bob, loopback, django_assert_max_num_queries
):
    book(alice, model="l4", count=1, period="day")  # builds the copy: nobody listens
    assert teams_listening() == frozenset()
    endpoint, _ = endpoint_create(
        acting=acting_as(alice), url="http://127.0.0.1:9/a", events=ALL_EVENTS
    )
    assert teams_listening() == {alice_team(alice)}
    book(alice, model="l4", count=1, period="day")
    assert WebhookDelivery.objects.count() == 2  # booking.created, allocation.started
    with django_assert_max_num_queries(0):
        teams_listening()
    endpoint_update(acting=acting_as(alice), endpoint=endpoint, is_active=False)
    assert teams_listening() == frozenset()
    book(alice, model="l4", count=1, period="day")
    assert WebhookDelivery.objects.count() == 2
    endpoint_update(acting=acting_as(alice), endpoint=endpoint, is_active=True)
    book(bob, model="l4", count=1, period="day")  # bob's team listens to nothing
    assert WebhookDelivery.objects.count() == 2
    endpoint.delete()
    assert teams_listening() == frozenset()


def alice_team(user):
    return acting_as(user).team.pk


@pytest.mark.django_db(transaction=True)
def test_the_secret_is_sealed_at_rest_and_survives_a_key_rotation(
    catalog, alice, loopback, settings
):
    with Receiver() as receiver:
        endpoint, secret = endpoint_create(
            acting=acting_as(alice), url=receiver.url, events=["booking.created"]
        )
        with connection.cursor() as cursor:
            cursor.execute("SELECT row_to_json(e)::text FROM webhooks_webhookendpoint e")
            (row,) = cursor.fetchone()
        assert secret.removeprefix("whsec_") not in row  # a dump alone cannot sign

        old_key = settings.SECRET_KEY
        settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "rotated-" + "k" * 50, [old_key]
        book(alice, model="l4", count=1, period="day")
        first = WebhookDelivery.objects.get()
        assert delivery_attempt(delivery_id=first.pk).status == DeliveryStatus.SUCCEEDED
        headers, body = receiver.accepted()[0]
        assert _verified(secret, headers, body)["type"] == "booking.created"

        settings.SECRET_KEY_FALLBACKS = []  # the old key dropped too soon (no reseal)
        book(alice, model="l4", count=1, period="day")
        second = WebhookDelivery.objects.exclude(pk=first.pk).get()
        attempt = delivery_attempt(delivery_id=second.pk)
    assert attempt.status == DeliveryStatus.PENDING and attempt.retry_in == 0.2
    second.refresh_from_db()
    assert "cannot unseal" in second.last_error and len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_after_a_reseal_the_old_key_can_go(catalog, alice, loopback, settings):
    with Receiver() as receiver:
        endpoint, secret = endpoint_create(
            acting=acting_as(alice), url=receiver.url, events=["booking.created"]
        )
        old_key = settings.SECRET_KEY
        settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "rotated-" + "k" * 50, [old_key]
        out = io.StringIO()
        call_command("webhook_secrets_reseal", stdout=out)
        assert out.getvalue().startswith("1 webhook secrets sealed")
        settings.SECRET_KEY_FALLBACKS = []
        book(alice, model="l4", count=1, period="day")
        attempt = delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)
    assert attempt.status == DeliveryStatus.SUCCEEDED
    headers, body = receiver.accepted()[0]
    assert _verified(secret, headers, body)["type"] == "booking.created"
    settings.SECRET_KEY = "another-" + "k" * 50  # now nothing opens it: the command says so
    with pytest.raises(CommandError, match="1 secrets open under no key"):
        call_command("webhook_secrets_reseal", stdout=io.StringIO())
