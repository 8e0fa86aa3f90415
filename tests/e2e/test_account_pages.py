"""The account pages allauth serves, in the product's words and look:
"check your inbox" with its resend form, the two-factor page and the e-mail addresses, at a
laptop in English and a phone in Polish, with no serious accessibility violation and no
horizontal scroll."""

import pytest
from django.core import mail

from tests.e2e.conftest import axe_serious, login, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIZES = [("en", 1366, 900), ("pl", 390, 844)]


def _fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("language, width, height", SIZES)
def test_check_your_inbox_sends_the_link_again(catalog, page, live_server, language, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.context.add_cookies(
        [{"name": "django_language", "value": language, "url": live_server.url}]
    )
    page.goto(f"{live_server.url}/account/signup/?lang={language}")
    page.locator("#id_email").fill("carol@example.com")
    page.locator("#id_username").fill("carol")
    page.locator("#id_password1").fill("a-long-password-1")
    page.locator("#id_password2").fill("a-long-password-1")
    page.locator("form button[type=submit]").click()
    page.wait_for_load_state()
    heading = {"en": "Check your inbox", "pl": "Sprawdź skrzynkę"}[language]
    assert page.get_by_role("heading", name=heading, level=1).is_visible()
    assert page.get_by_role("link", name="support@anchorgpu.example").is_visible()
    assert _fits(page) and axe_serious(page) == []
    screenshot(page, f"account-check-inbox-{language}-{width}")

    page.locator("#id_resend_email").fill("carol@example.com")
    page.locator("#id_resend_email").press("Enter")
    page.wait_for_load_state()
    assert len(mail.outbox) == 2
    assert page.locator(".msg").first.is_visible()
    screenshot(page, f"account-check-inbox-sent-{language}-{width}")
    assert page.errors == []


@pytest.mark.parametrize("language, width, height", SIZES)
def test_two_factor_and_addresses_pages(catalog, alice, page, live_server, language, width, height):
    page.set_viewport_size({"width": width, "height": height})
    login(page, live_server, "alice", "pw-alice-123456")
    for path, name, heading in (
        (
            "/account/2fa/",
            "two-factor",
            {"en": "Two-factor sign-in", "pl": "Logowanie dwuskładnikowe"},
        ),
        ("/account/email/", "addresses", {"en": "E-mail addresses", "pl": "Adresy e-mail"}),
        (
            "/account/password/change/",
            "password",
            {"en": "Change your password", "pl": "Zmień hasło"},
        ),
    ):
        page.goto(f"{live_server.url}{path}?lang={language}")
        assert page.get_by_role("heading", name=heading[language], level=1).is_visible()
        assert _fits(page), path
        assert axe_serious(page) == [], path
        screenshot(page, f"account-{name}-{language}-{width}")
    assert page.errors == []
