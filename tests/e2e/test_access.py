"""The hand-over in the browser: add an SSH key, book, watch the access become ready with
the ssh command to copy, and log in with it (the real OpenSSH client)."""

import re

import pytest

from catalog.models import Node, NodeState
from rentals.access import tenant_login
from rentals.models import Allocation
from tests.e2e.conftest import axe_serious, login, screenshot
from tests.support.browser import get_quote
from tests.support.nodes import SimulatedNode
from tests.support.ssh import keypair, ssh

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def h100_node(catalog, live_server, tmp_path):
    node = Node.objects.filter(gpu_model=catalog.h100).order_by("hostname").first()
    Node.objects.filter(gpu_model=catalog.h100).exclude(pk=node.pk).update(
        state=NodeState.MAINTENANCE
    )
    simulated = SimulatedNode(node, tmp_path, live_server.url)
    yield simulated
    simulated.close()


def test_add_a_key_book_and_log_in_with_the_command_shown(
    h100_node, alice, page, live_server, tmp_path
):
    private, public = keypair(tmp_path, "laptop")
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/account/ssh-keys/")
    page.get_by_label("Public key").fill(public)
    page.get_by_role("button", name="Add key").click()
    page.wait_for_load_state()
    assert page.get_by_text("Key laptop added.").is_visible()
    fingerprint = page.locator("td code").first.inner_text()
    assert fingerprint.startswith("SHA256:")
    screenshot(page, "ssh-keys")
    assert axe_serious(page) == []

    get_quote(page, live_server, model="h100", gpus="2")
    assert page.get_by_label(re.compile("laptop")).is_checked()
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    allocation = Allocation.objects.get()
    assert page.locator("#access-state").inner_text() == "getting ready"

    h100_node.round()
    page.reload()
    assert page.locator("#access-state").inner_text() == "ready"
    command = page.locator("#ssh-command").inner_text()
    login_name = tenant_login(allocation.pk)
    assert command == f"ssh -p {h100_node.port} {login_name}@127.0.0.1"
    assert fingerprint in page.locator("#access").inner_text()
    page.locator("#access").scroll_into_view_if_needed()
    screenshot(page, "access-ready")
    assert axe_serious(page) == []
    status, listed = ssh(private, h100_node.port, login_name, "nvidia-smi -L")
    assert status == 0 and len(listed.splitlines()) == 2
    assert page.errors == []
