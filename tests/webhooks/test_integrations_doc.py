"""docs/integrations.md's Python example, run as written against a live server: it books
with an idempotency key (a replay books once) and verifies a real webhook's signature."""

import re
from pathlib import Path

import httpx
import pytest

from accounts.services.tokens import api_token_create
from rentals.models import Allocation, LedgerEntry
from tests.support.receiver import Receiver
from tests.support.waiting import wait_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def example_namespace(monkeypatch, url, token):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    monkeypatch.setenv("ANCHORGPU_URL", url)
    monkeypatch.setenv("ANCHORGPU_TOKEN", token)
    namespace = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # the documented code, as written
    return namespace


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_documented_example_books_once_and_verifies_a_webhook(
    catalog, alice, alice_api, live_server, monkeypatch, settings, worker
):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    token = api_token_create(user=alice, name="ci")
    example = example_namespace(monkeypatch, live_server.url, token)
    with Receiver() as receiver:
        secret = alice_api.post(
            "/api/v1/webhooks/endpoints/", {"url": receiver.url, "events": ["booking.created"]},
            format="json",
        ).json()["secret"]  # fmt: skip
        key = "5b0c6c1e-3f7a-4d2e-9a41-0c9e2d7f6a10"
        booking = example["book"]("l4", 2, "day", 1, key=key)
        replay = httpx.post(
            f"{live_server.url}/api/v1/bookings/", json={"quote": booking["allocation"]["quote"]},
            headers={"Idempotency-Key": key, "Authorization": f"Bearer {token}"},
        )  # fmt: skip
        assert replay.headers["Idempotent-Replayed"] == "true"
        assert replay.json()["id"] == booking["id"]
        assert wait_for(lambda: len(receiver.accepted()) == 1)
        headers, body = receiver.accepted()[0]

    assert booking["allocation"]["gpu_count"] == 2
    event = example["webhook_event"](secret, body, headers)
    assert event["type"] == "booking.created" and event["data"]["booking"] == booking["id"]
    assert example["webhook_event"](secret, body.replace(b'"l4"', b'"h100"'), headers) is None
    assert example["webhook_event"]("whsec_" + "B" * 43, body, headers) is None
    assert Allocation.objects.count() == 1 == LedgerEntry.objects.count()
