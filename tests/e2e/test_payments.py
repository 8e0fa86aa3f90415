"""A card team saves a card through Stripe.js (localstripe's copy), books with 4242 and
sees "paid" on its invoice; a declining card's message; the staff payments page on a
phone. Screenshots in test-artifacts/."""

import re

import pytest

from accounts.roles import acting_as
from payments.services import card_save
from tests.e2e.conftest import axe_serious, login, screenshot
from tests.payments.conftest import DECLINES, card_team, card_token
from tests.support.browser import get_quote

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_add_a_card_book_with_4242_and_see_paid_then_a_decline(
    catalog, alice, page, live_server, pln_rates
):
    team = card_team(alice, number=None)
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/teams/{team.pk}/billing/")
    page.get_by_role("link", name="Add a card").click()
    page.wait_for_selector("#card-element input")
    for field, value in (("number", "4242424242424242"), ("exp_month", "12"), ("exp_year", "31"),
                         ("cvc", "123"), ("postal_code", "00001")):  # fmt: skip
        page.locator(f"#card-element input[placeholder={field}]").fill(value)
    page.get_by_role("button", name="Save the card").click()
    page.wait_for_selector("text=•••• 4242")
    screenshot(page, "billing-card-saved")
    assert axe_serious(page) == []

    get_quote(page, live_server)
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    page.goto(f"{live_server.url}/invoices/")
    assert page.locator("td.payment-status").first.inner_text().startswith("paid")
    screenshot(page, "invoice-paid")

    card_save(acting=acting_as(alice), payment_method=card_token(DECLINES))  # now the default
    get_quote(page, live_server)
    page.get_by_role("button", name="Book").click()
    page.wait_for_selector("text=declined")
    assert "Nothing was booked or charged" in page.content()
    screenshot(page, "card-declined")
    assert page.errors == []


def test_staff_payments_page_on_a_phone(catalog, staff, browser, live_server):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, locale="en-US", is_mobile=True
    )
    phone = context.new_page()
    try:
        login(phone, live_server, "staff", "pw-staff-123456")
        phone.goto(f"{live_server.url}/payments/")
        assert phone.get_by_role("heading", name="Unmatched transfers").is_visible()
        screenshot(phone, "staff-payments-phone")
        assert axe_serious(phone) == []
    finally:
        context.close()


def test_three_d_secure_is_completed_in_the_browser_and_books_once(
    catalog, alice, page, live_server, pln_rates
):
    from payments.models import Payment, PaymentState  # noqa: PLC0415
    from rentals.models import Allocation  # noqa: PLC0415
    from tests.payments.conftest import THREE_D_SECURE  # noqa: PLC0415

    card_team(alice, THREE_D_SECURE)
    login(page, live_server, "alice", "pw-alice-123456")
    get_quote(page, live_server)
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/payments/\d+/authenticate/$"))
    assert Allocation.objects.count() == 0
    screenshot(page, "three-d-secure")
    page.get_by_role("button", name="Confirm with 3-D Secure").click()
    page.get_by_role("button", name="Complete authentication").click()  # localstripe's bank
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    assert Allocation.objects.count() == 1
    assert Payment.objects.get().state == PaymentState.CAPTURED
