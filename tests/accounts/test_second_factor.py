"""The second factor guards every door a password opens: the API token too. Wrong codes are
counted like wrong passwords (five lock the step, in Redis, so a restart keeps the lock),
a code is taken once (the one that turned TOTP on included), and a team can require it
of every member."""

import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import time_machine
from allauth.mfa.models import Authenticator
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, generate_totp_secret, hotp_value
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Role, SignIn
from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from accounts.signin import SECOND_FACTOR_THRESHOLD
from tests.support.booking import book
from tests.support.factories.accounts import team_with

pytestmark = pytest.mark.django_db
PASSWORD = {"username": "alice", "password": "pw-alice-123456"}
LOCKED = "Too many failed attempts; try again in a few minutes."


def _code(secret, at=None):
    counter = int((at or timezone.now()).timestamp()) // 30
    return format_hotp_value(hotp_value(secret, counter))


@pytest.fixture
def secret(alice):
    secret = generate_totp_secret()
    TOTP.activate(alice, secret)
    return secret


def test_a_password_alone_gets_no_token_for_an_account_with_a_second_factor(secret, api):
    refused = api.post("/api/v1/auth/token/", PASSWORD)
    assert refused.status_code == 401 and refused["Content-Type"] == "application/problem+json"
    assert refused.json()["code"] == "otp_required" and "otp" in refused.json()["errors"]
    assert "authenticator app" in refused.json()["detail"]
    wrong = api.post("/api/v1/auth/token/", PASSWORD | {"otp": "000000"})
    assert wrong.status_code == 401 and wrong.json()["code"] == "otp_wrong"
    assert not SignIn.objects.exists()

    issued = api.post("/api/v1/auth/token/", PASSWORD | {"otp": _code(secret)})
    assert issued.status_code == 201
    bearer = APIClient(HTTP_AUTHORIZATION=f"Bearer {issued.json()['token']}")
    assert bearer.get("/api/v1/allocations/").status_code == 200
    assert list(SignIn.objects.values_list("method", flat=True)) == ["api_2fa"]


def test_a_recovery_code_works_once(alice, secret, api):
    code = RecoveryCodes.activate(alice).get_unused_codes()[0]
    assert api.post("/api/v1/auth/token/", PASSWORD | {"otp": code}).status_code == 201
    again = api.post("/api/v1/auth/token/", PASSWORD | {"otp": code})
    assert again.status_code == 401 and again.json()["code"] == "otp_wrong"


def test_a_code_is_taken_once(secret, api):
    code = _code(secret)
    assert api.post("/api/v1/auth/token/", PASSWORD | {"otp": code}).status_code == 201
    assert api.post("/api/v1/auth/token/", PASSWORD | {"otp": code}).status_code == 401


def test_five_wrong_codes_lock_the_second_step_from_anywhere(secret, api):
    for n in range(SECOND_FACTOR_THRESHOLD):
        wrong = api.post(
            "/api/v1/auth/token/", PASSWORD | {"otp": "000000"}, REMOTE_ADDR=f"10.8.0.{n}"
        )
        assert wrong.status_code == 401
    locked = api.post(
        "/api/v1/auth/token/", PASSWORD | {"otp": _code(secret)}, REMOTE_ADDR="10.9.9.9"
    )
    assert locked.status_code == 429 and locked.json()["detail"] == LOCKED
    assert locked["Retry-After"] == "300"

    # The web form's second step is the same lock, in the same words.
    web, step = _web_second_step()
    assert LOCKED in web.post(step, {"code": _code(secret)}).content.decode()
    assert "_auth_user_id" not in web.session


def _web_second_step():
    """A browser past the password, at the second step: (client, the step's URL)."""
    client = Client()
    first = client.post("/account/login/", {"login": "alice", "password": "pw-alice-123456"})
    assert first.status_code == 302 and "/2fa/authenticate" in first.url
    return client, first.url


def test_wrong_codes_on_the_web_form_count_toward_the_same_lock(secret, api):
    client, step = _web_second_step()
    for _ in range(SECOND_FACTOR_THRESHOLD):
        page = client.post(step, {"code": "000000"})
        assert page.status_code == 200 and "_auth_user_id" not in client.session
    locked = api.post("/api/v1/auth/token/", PASSWORD | {"otp": _code(secret)})
    assert locked.status_code == 429


def test_the_lock_lives_outside_the_process(alice, secret, api):
    """A new process (a restart, another web worker) sees the same lock."""
    for _ in range(SECOND_FACTOR_THRESHOLD):
        api.post("/api/v1/auth/token/", PASSWORD | {"otp": "000000"})
    prefix = django_settings.CACHES["default"].get("KEY_PREFIX", "")
    script = textwrap.dedent(f"""
        import django; django.setup()
        from django.conf import settings
        from django.contrib.auth.models import User
        from django.test import RequestFactory
        from accounts.errors import LockedOut
        from accounts.signin import second_factor_check
        settings.CACHES["default"]["KEY_PREFIX"] = {prefix!r}
        try:
            second_factor_check(RequestFactory().post("/"), user=User(pk={alice.pk}), code="1")
        except LockedOut as exc:
            print("locked:", exc.detail)
    """)
    env = os.environ | {"DJANGO_SETTINGS_MODULE": "anchorgpu.settings"}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert run.stdout.strip() == f"locked: {LOCKED}", run.stderr


def test_the_code_that_turned_totp_on_cannot_sign_in(bob, client):
    client.post("/account/login/", {"login": "bob", "password": "pw-bob-1234567"})
    client.post("/account/reauthenticate/", {"password": "pw-bob-1234567"})  # as allauth asks
    client.get("/account/2fa/totp/activate/")
    secret = client.session["mfa.totp.secret"]
    code = _code(secret)
    activated = client.post("/account/2fa/totp/activate/", {"code": code})
    assert activated.status_code == 302 and Authenticator.objects.filter(user=bob).exists()
    client.post("/account/logout/")

    second = client.post("/account/login/", {"login": "bob", "password": "pw-bob-1234567"})
    client.post(second.url, {"code": code})
    assert "_auth_user_id" not in client.session
    api = APIClient()
    reused = api.post(
        "/api/v1/auth/token/", {"username": "bob", "password": "pw-bob-1234567", "otp": code}
    )
    assert reused.status_code == 401 and reused.json()["code"] == "otp_wrong"
    with time_machine.travel(timezone.now() + timedelta(seconds=30)):
        fresh = _code(secret)
        client.post(second.url, {"code": fresh})
    assert client.session["_auth_user_id"] == str(bob.pk)


def test_a_team_that_requires_a_second_factor_refuses_members_without_one(catalog, alice, bob):
    team = team_with(alice, {bob: Role.MEMBER})
    running = book(alice, model="h100", count=1, period="day", team=team)
    owner = APIClient(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=alice, name='o', team=team)}"
    )
    refused = owner.patch(
        f"/api/v1/teams/{team.pk}/", {"require_second_factor": True}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["code"] == "second_factor_required"
    TOTP.activate(alice, generate_totp_secret())
    assert owner.patch(
        f"/api/v1/teams/{team.pk}/", {"require_second_factor": True}, format="json"
    ).json()["require_second_factor"]

    member = APIClient(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='m', team=team)}"
    )
    stop = member.post(f"/api/v1/allocations/{running.pk}/stop/")
    assert stop.status_code == 403 and stop.json()["code"] == "second_factor_required"
    assert "Acme requires two-factor sign-in" in stop.json()["detail"]
    assert member.get(f"/api/v1/allocations/{running.pk}/").status_code == 403
    assert member.get(f"/api/v1/teams/{team.pk}/members/").status_code == 200  # may see why

    page = APIClient()
    page.force_login(bob)
    shown = page.get(f"/teams/{team.pk}/").content.decode()
    assert "Acme requires two-factor sign-in" in shown and "Turn on two-factor sign-in" in shown

    TOTP.activate(bob, generate_totp_secret())
    assert member.post(f"/api/v1/allocations/{running.pk}/stop/").status_code == 200
    assert acting_as(bob, team).can("act")
