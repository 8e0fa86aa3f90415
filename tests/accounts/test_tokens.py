"""API tokens expire, are capped per user, die with the password, and can be listed and
revoked through the API as well as on the page."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services.tokens import api_token_create

pytestmark = pytest.mark.django_db


def _bearer(api, secret):
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return api


def test_an_expired_token_is_refused(alice, api):
    secret = api_token_create(user=alice, name="ci")
    assert _bearer(api, secret).get("/api/v1/ledger/").status_code == 200
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api.get("/api/v1/ledger/").status_code == 401


def test_a_new_token_lives_ninety_days_by_default(alice):
    api_token_create(user=alice, name="ci")
    lifetime = ApiToken.objects.get().expires_at - timezone.now()
    assert timedelta(days=89, hours=23) < lifetime <= timedelta(days=90)


def test_a_password_change_kills_every_token_issued_before_it(alice, api):
    secret = api_token_create(user=alice, name="laptop")
    alice.set_password("a-brand-new-password-1")
    alice.save()
    assert _bearer(api, secret).get("/api/v1/ledger/").status_code == 401
    assert ApiToken.objects.get().revoked_at is not None
    fresh = api_token_create(user=alice, name="after")
    assert _bearer(api, fresh).get("/api/v1/ledger/").status_code == 200


def test_tokens_are_capped_per_user_and_the_refusal_changes_nothing(alice, api, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "API_TOKENS_MAX": 3}
    for n in range(3):
        api_token_create(user=alice, name=f"t{n}")
    response = api.post("/api/v1/auth/token/", {"username": "alice", "password": "pw-alice-123456"})
    assert response.status_code == 409 and response.json()["code"] == "too_many_tokens"
    assert ApiToken.objects.count() == 3


def test_tokens_are_listed_and_revoked_through_the_api(alice, bob, api):
    secret = api_token_create(user=alice, name="ci")
    other = api_token_create(user=bob, name="bobs")
    _bearer(api, secret)
    listed = api.get("/api/v1/auth/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["ci"] and "key_hash" not in listed[0]
    bobs = ApiToken.objects.get(user=bob)
    assert api.delete(f"/api/v1/auth/tokens/{bobs.pk}/").status_code == 404
    assert api.delete(f"/api/v1/auth/tokens/{listed[0]['id']}/").status_code == 204
    assert api.get("/api/v1/auth/tokens/").status_code == 401
    assert _bearer(api, other).get("/api/v1/ledger/").status_code == 200


def test_a_non_numeric_revoke_on_the_page_is_refused_quietly(alice, client):
    client.force_login(alice)
    api_token_create(user=alice, name="ci")
    response = client.post("/account/tokens/", {"revoke": "abc"})
    assert response.status_code == 302
    assert ApiToken.objects.get().revoked_at is None


def test_a_key_rotation_with_the_old_key_kept_ends_no_token(alice, api, settings):
    secret = api_token_create(user=alice, name="ci")
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "rotated-" + "k" * 50, [old_key]
    assert _bearer(api, secret).get("/api/v1/ledger/").status_code == 200
    settings.SECRET_KEY_FALLBACKS = []  # the token was stamped again under the new key
    assert api.get("/api/v1/ledger/").status_code == 200
    assert ApiToken.objects.get().revoked_at is None


def test_a_key_rotation_without_the_old_key_ends_every_token(alice, api, settings):
    secret = api_token_create(user=alice, name="ci")
    settings.SECRET_KEY = "rotated-" + "k" * 50
    assert _bearer(api, secret).get("/api/v1/ledger/").status_code == 401
    assert ApiToken.objects.get().revoked_at is not None


def test_an_unconfirmed_account_gets_no_token_until_its_address_is_confirmed(api):
    from allauth.account.models import EmailAddress
    from django.contrib.auth import get_user_model

    from accounts.models import SignIn

    dave = get_user_model().objects.create_user("dave", "dave@example.com", "pw-dave-1234567")
    EmailAddress.objects.create(user=dave, email="dave@example.com", verified=False, primary=True)
    credentials = {"username": "dave", "password": "pw-dave-1234567"}

    refused = api.post("/api/v1/auth/token/", credentials)

    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/problem+json"
    body = refused.json()
    assert body["code"] == "email_unverified"
    assert "Confirm your e-mail address before you create an API token" in body["detail"]
    assert not ApiToken.objects.exists() and not SignIn.objects.filter(user=dave).exists()
    wrong = api.post("/api/v1/auth/token/", {**credentials, "password": "not-the-password"})
    assert wrong.status_code == 401  # a wrong password still says only that

    EmailAddress.objects.filter(user=dave).update(verified=True)
    assert api.post("/api/v1/auth/token/", credentials).status_code == 201
    assert ApiToken.objects.filter(user=dave).count() == 1
