"""Account mails and pages in the product's own words: the site's name
from the settings (not the host, "127.0.0.1:18800"), a grammatical Polish subject, headings
in sentence case like every other page, a real contact instead of "Please contact us", and
a way to have the confirmation link sent again from the "check your inbox" page."""

import re

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db

SIGNUP = {
    "email": "carol@example.com",
    "username": "carol",
    "password1": "a-long-password-1",
    "password2": "a-long-password-1",
}
TITLE_CASE = re.compile(r"\b[A-Z][a-z]+ [A-Z][a-z]+")  # "Verify Your", "Password Reset"


def _headings(html: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", h).strip()
        for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", html, re.S)
    ]


def test_the_confirmation_mail_names_the_site_from_the_settings(catalog, settings):
    settings.SITE_NAME = "Kompute"
    settings.ACCOUNT_EMAIL_SUBJECT_PREFIX = "[Kompute] "
    client = Client(HTTP_HOST="127.0.0.1:18800")

    client.post("/account/signup/", SIGNUP)

    (message,) = mail.outbox
    assert message.subject == "[Kompute] Confirm your e-mail address"
    assert message.body.startswith("Hello,\n")
    assert "the Kompute account carol" in message.body
    assert "— Kompute\nQuestions? Write to support@anchorgpu.example." in message.body
    assert "127.0.0.1:18800!" not in message.body and "Hello from" not in message.body
    assert re.search(r"http://127\.0\.0\.1:18800/account/confirm-email/\S+/", message.body)


def test_the_polish_confirmation_mail_is_grammatical(catalog):
    client = Client(HTTP_ACCEPT_LANGUAGE="pl")

    client.post("/account/signup/?lang=pl", SIGNUP)

    (message,) = mail.outbox
    assert message.subject == "[AnchorGPU] Potwierdź swój adres e-mail"
    assert message.body.startswith("Dzień dobry,\n")
    assert "Proszę potwierdź" not in message.body


@pytest.mark.parametrize("language", ["en", "pl"])
def test_account_pages_read_like_the_product(catalog, alice, client, language):
    pages = [
        "/account/confirm-email/", "/account/password/reset/", "/account/password/reset/done/",
        "/account/password/reset/key/done/", "/account/inactive/",
        "/account/confirm-email/no-such-key/", "/account/password/reset/key/bad-key/",
    ]  # fmt: skip
    signed_in = [
        "/account/logout/",
        "/account/email/",
        "/account/password/change/",
        "/account/2fa/",
    ]
    for url in pages + signed_in:
        if url == signed_in[0]:
            client.force_login(alice)
        html = client.get(f"{url}?lang={language}").content.decode()
        headings = _headings(html)

        assert headings, url
        assert not [h for h in headings if TITLE_CASE.search(h)], (url, headings)
        assert "contact us" not in html.lower() and "Please" not in html, url
        if language == "pl":
            assert not [h for h in headings if h in ("Check your inbox", "Sign out")], url
    client.logout()
    inbox = client.get(f"/account/confirm-email/?lang={language}").content.decode()
    assert 'href="mailto:support@anchorgpu.example"' in inbox
    assert 'action="/account/confirm-email-again/"' in inbox


def test_the_check_your_inbox_page_sends_the_link_again_once_in_a_while(catalog, client):
    client.post("/account/signup/", SIGNUP)
    assert len(mail.outbox) == 1
    page = client.get("/account/confirm-email/").content.decode()
    assert "Send the link again" in page

    again = client.post(
        "/account/confirm-email-again/", {"email": "Carol@Example.com"}, follow=True
    )

    assert len(mail.outbox) == 2 and mail.outbox[-1].to == ["carol@example.com"]
    assert "we have sent it a new link" in again.content.decode()
    link = re.search(r"https?://[^/\s]+(/account/confirm-email/\S+/)", mail.outbox[-1].body)[1]
    # Again at once: refused in words, nothing sent.
    soon = client.post("/account/confirm-email-again/", {"email": "carol@example.com"}, follow=True)
    assert "less than three minutes ago" in soon.content.decode() and len(mail.outbox) == 2
    # An address nobody signed up with gets the same answer and no mail.
    other = client.post(
        "/account/confirm-email-again/", {"email": "nobody@example.com"}, follow=True
    )
    assert "we have sent it a new link" in other.content.decode() and len(mail.outbox) == 2
    # The new link confirms the address.
    client.post(link)
    assert EmailAddress.objects.get(email="carol@example.com").verified
    # A confirmed address gets no more links.
    client.logout()
    from django.core.cache import cache

    cache.clear()
    client.post("/account/confirm-email-again/", {"email": "carol@example.com"})
    assert len(mail.outbox) == 2
