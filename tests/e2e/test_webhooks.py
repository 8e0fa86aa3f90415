"""A customer registers a webhook endpoint in the browser and sends a test event."""

import re

import pytest

from tests.e2e.conftest import axe_serious, login, screenshot
from tests.support.receiver import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_register_an_endpoint_and_send_a_test_event(alice, page, live_server, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    with Receiver() as receiver:
        login(page, live_server, "alice", "pw-alice-123456")
        page.goto(f"{live_server.url}/account/profile/")
        page.get_by_role("link", name="Webhooks").click()
        page.wait_for_url(re.compile(r"/account/webhooks/"))
        page.get_by_label("Receiver URL").fill(receiver.url)
        page.get_by_label("Note").fill("training pipeline")
        page.get_by_role("button", name="Add endpoint").click()
        secret = page.locator("#new-secret").inner_text()
        assert secret.startswith("whsec_")
        page.get_by_role("button", name="Send a test event").click()
        page.wait_for_load_state()
        assert page.get_by_text("A test event is on its way").is_visible()
        assert page.get_by_role("cell", name="webhook.test").is_visible()
        screenshot(page, "webhooks")
        assert axe_serious(page) == []
        assert page.errors == []
