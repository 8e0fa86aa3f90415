"""Staff see an impaired allocation, read its credit note and issue it; the customer sees the
credit in the statement."""

import re
from datetime import timedelta

import pytest

from rentals.models import ImpairedSpan, LedgerEntry
from tests.e2e.conftest import axe_serious, login, screenshot
from tests.support.booking import book
from tests.support.factories.catalog import catalog_setup
from tests.support.operators import operator

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_staff_preview_and_issue_a_credit_the_customer_then_reads(alice, page, live_server):
    catalog_setup()
    allocation = book(alice, model="h100", count=2, period="week")
    ImpairedSpan.objects.create(
        allocation=allocation, started_at=allocation.paid_from + timedelta(hours=1),
        ended_at=allocation.paid_from + timedelta(hours=6),
        gpus=[allocation.current_holdings[0].gpu_id],
    )  # fmt: skip
    operator("ops")
    login(page, live_server, "ops", "pw-ops-123456")
    page.get_by_role("link", name="Impaired").click()
    page.wait_for_url(re.compile(r"/impaired/"))
    row = page.locator(f"#impaired-{allocation.pk}")
    text = row.inner_text().replace("\xa0", " ")
    assert "10.80 USD" in text and "Total: 13.28 USD" in text  # 5 h × 2.16, + 23 % VAT
    screenshot(page, "impaired-staff")
    assert axe_serious(page) == []
    page.on("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Issue credit").click()
    page.wait_for_load_state()
    assert page.get_by_text("Credit issued: 13.28 USD").is_visible()
    assert LedgerEntry.objects.filter(kind="credit").count() == 1
    assert page.errors == []

    page.context.clear_cookies()
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/statement/")
    credit = page.get_by_role("row").filter(has_text="Credit: impaired GPUs from")
    row = credit.inner_text().replace("\xa0", " ").replace("−", "-")
    assert "-10.80 USD" in row and "-2.48 USD" in row and "-13.28 USD" in row  # net, VAT, gross
    screenshot(page, "impaired-statement")
    assert page.errors == []
