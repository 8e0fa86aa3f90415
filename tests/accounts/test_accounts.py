"""Accounts with django-allauth: sign-up, a verified e-mail before the first booking,
password reset, two-factor sign-in, preferences and the sign-in history."""

import re
import uuid

import pytest
from allauth.account.models import EmailAddress
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, generate_totp_secret, hotp_value
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.utils import timezone

from accounts.models import Profile, SignIn
from accounts.roles import acting_as
from rentals.models import Allocation
from rentals.services import quote_create

pytestmark = pytest.mark.django_db

SIGNUP = {
    "email": "carol@example.com",
    "username": "carol",
    "password1": "a-long-password-1",
    "password2": "a-long-password-1",
}


def _link(message):
    return re.search(r"https?://[^/\s]+(/\S+)", message.body).group(1)


def test_sign_up_confirms_the_address_before_the_first_sign_in(catalog, client):
    response = client.post("/account/signup/", SIGNUP)
    assert response.status_code == 302 and response.url == "/account/confirm-email/"
    assert "_auth_user_id" not in client.session
    signed_in = client.post("/account/login/", {"login": "carol", "password": SIGNUP["password1"]})
    assert "_auth_user_id" not in client.session  # unconfirmed: the link is sent again
    assert signed_in.url == "/account/confirm-email/"

    client.post(_link(mail.outbox[-1]))
    carol = User.objects.get(username="carol")
    assert client.session["_auth_user_id"] == str(carol.pk)
    # Signed in by the link, and the history says so (not "password").
    assert list(SignIn.objects.filter(user=carol).values_list("method", flat=True)) == [
        "email_link"
    ]
    history = client.get("/account/profile/").content.decode()
    assert "e-mail confirmation link" in history
    quote = quote_create(
        acting=acting_as(carol), gpu_model="l4", gpu_count=1, period="day", period_count=1
    )
    booked = client.post(f"/quotes/{quote.pk}/book/", {"idempotency_key": str(uuid.uuid4())})
    assert booked.status_code == 302 and Allocation.objects.count() == 1


def test_an_address_added_later_is_confirmed_before_a_booking_too(catalog, client):
    """A person whose only address is unconfirmed (staff made the account with one, say)
    buys nothing until it is confirmed."""
    dave = User.objects.create_user("dave", "dave@example.com", "pw-dave-12345678")
    EmailAddress.objects.create(user=dave, email="dave@example.com", verified=False, primary=True)
    client.force_login(dave)
    quote = quote_create(
        acting=acting_as(dave), gpu_model="l4", gpu_count=1, period="day", period_count=1
    )
    refused = client.post(f"/quotes/{quote.pk}/book/", {"idempotency_key": str(uuid.uuid4())})
    assert refused.status_code == 403 and "Confirm your e-mail" in refused.content.decode()
    assert Allocation.objects.count() == 0


def test_sign_up_answers_the_same_for_a_registered_address(alice, client):
    """Nobody learns from sign-up whether an address is registered; its owner is told."""
    new = client.post("/account/signup/", SIGNUP)
    new_page = client.get(new.url).content.decode()
    other = Client()
    taken = other.post(
        "/account/signup/", SIGNUP | {"email": "ALICE@example.com", "username": "eve"}
    )
    taken_page = other.get(taken.url).content.decode()
    assert (taken.status_code, taken.url) == (new.status_code, new.url)
    assert _without_tokens(taken_page).replace("alice@", "@") == _without_tokens(new_page).replace(
        "carol@", "@"
    )
    assert not User.objects.filter(username="eve").exists()
    to_alice = [m for m in mail.outbox if m.to == ["alice@example.com"]]
    assert len(to_alice) == 1 and "already" in to_alice[0].body.lower()
    assert "password" in to_alice[0].body.lower()  # how to get in: a reset, not a new account


def _without_tokens(page: str) -> str:
    return re.sub(r'(csrfmiddlewaretoken" value=|nonce=)"[^"]*"', "", page)


def test_invite_only_sign_up_is_closed_without_an_invitation(client, settings, django_user_model):
    settings.SIGNUP_MODE = "invite"
    response = client.post("/account/signup/", SIGNUP)
    assert "Sign-up is by invitation" in response.content.decode()
    assert not django_user_model.objects.filter(username="carol").exists()


def test_password_reset_by_mail(alice, client):
    client.post("/account/password/reset/", {"email": "alice@example.com"})
    reset = _link(mail.outbox[-1])
    opened = client.get(reset)  # allauth moves the key into the session and redirects
    form_url = opened.url if opened.status_code == 302 else reset
    client.post(form_url, {"password1": "a-fresh-password-9", "password2": "a-fresh-password-9"})
    alice.refresh_from_db()
    assert alice.check_password("a-fresh-password-9")


def test_two_factor_sign_in_asks_for_the_code(alice, client):
    secret = generate_totp_secret()
    TOTP.activate(alice, secret)
    first = client.post("/account/login/", {"login": "alice", "password": "pw-alice-123456"})
    assert first.status_code == 302 and "/2fa/authenticate" in first.url
    assert "_auth_user_id" not in client.session
    wrong = client.post(first.url, {"code": "000000"})
    assert "_auth_user_id" not in client.session and wrong.status_code == 200
    counter = int(timezone.now().timestamp()) // 30
    client.post(first.url, {"code": format_hotp_value(hotp_value(secret, counter))})
    assert client.session["_auth_user_id"] == str(alice.pk)


def test_preferences_and_history_on_the_account_page(alice, client):
    client.post("/account/login/", {"login": "alice", "password": "pw-alice-123456"})
    page = client.get("/account/profile/").content.decode()
    assert "Sign-in history" in page and "127.0.0.1" in page
    client.post(
        "/account/profile/",
        {
            "first_name": "Alice",
            "last_name": "Nowak",
            "language": "pl",
            "time_zone": "Europe/Warsaw",
        },
    )
    profile = Profile.objects.get(user=alice)
    assert (profile.language, profile.time_zone) == ("pl", "Europe/Warsaw")
    assert '<html lang="pl">' in client.get("/").content.decode()
    bad = client.post("/account/profile/", {"language": "pl", "time_zone": "Mars/Olympus"})
    assert bad.status_code == 400
    assert Profile.objects.get(user=alice).time_zone == "Europe/Warsaw"


def test_the_language_switch_is_remembered_for_the_signed_in_user(alice, client):
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "pl", "next": "/"})
    assert Profile.objects.get(user=alice).language == "pl"
