"""A token tells its holder who they are, and can be exchanged for one of another of the
same user's teams (what `agpu team use` does): within the user's role there and the token's
own, never living longer than the token given up, which dies in the exchange."""

import pytest
from rest_framework.test import APIClient

from accounts.models import ApiToken, Role
from accounts.services.teams import team_create
from accounts.services.tokens import api_token_create
from tests.support.factories.accounts import team_with

pytestmark = pytest.mark.django_db


def _bearer(secret):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return api


@pytest.fixture
def acme(alice, bob):
    """Bob's team, where alice is a member."""
    team = team_with(bob, {alice: Role.MEMBER})
    return team


def test_the_current_token_names_its_user_team_role_and_the_users_teams(alice, acme):
    secret = api_token_create(user=alice, name="laptop")
    token = ApiToken.objects.get()
    body = _bearer(secret).get("/api/v1/auth/token/current/").json()
    assert body == {
        "id": token.pk,
        "name": "laptop",
        "hint": secret[:9],
        "user": "alice",
        "team": token.team_id,
        "team_name": "alice",
        "role": "owner",
        "created_at": body["created_at"],
        "expires_at": token.expires_at.isoformat().replace("+00:00", "Z"),
        "teams": [
            {"id": token.team_id, "name": "alice", "personal": True, "role": "owner"},
            {"id": acme.pk, "name": "Acme", "personal": False, "role": "member"},
        ],
    }


def test_a_token_is_exchanged_for_one_of_another_team_that_expires_no_later(alice, acme):
    secret = api_token_create(user=alice, name="laptop")
    old = ApiToken.objects.get()
    answer = _bearer(secret).post("/api/v1/auth/token/exchange/", {"team": acme.pk})
    assert answer.status_code == 201, answer.json()
    new = ApiToken.objects.get(revoked_at__isnull=True)
    assert (new.team, new.role, new.name, new.expires_at) == (
        acme, Role.MEMBER, "laptop", old.expires_at
    )  # fmt: skip
    assert _bearer(secret).get("/api/v1/ledger/").status_code == 401  # given up
    acting = _bearer(answer.json()["token"]).get("/api/v1/auth/token/current/").json()
    assert (acting["team"], acting["role"]) == (acme.pk, "member")
    again = _bearer(secret).post("/api/v1/auth/token/exchange/", {"team": acme.pk})
    assert again.status_code == 401 and ApiToken.objects.count() == 2  # exchanged once


def test_a_token_never_becomes_one_that_does_more_than_it_could(alice, bob, acme):
    """A viewer token stays a viewer token in a team where the user is a member; asking for
    more is refused and changes nothing."""
    secret = api_token_create(user=alice, name="dashboard", role=Role.VIEWER)
    refused = _bearer(secret).post(
        "/api/v1/auth/token/exchange/", {"team": acme.pk, "role": "member"}
    )
    assert refused.status_code == 403 and list(refused.json()["errors"]) == ["role"]
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1
    answer = _bearer(secret).post("/api/v1/auth/token/exchange/", {"team": acme.pk})
    assert answer.status_code == 201
    assert ApiToken.objects.get(revoked_at__isnull=True).role == Role.VIEWER


def test_no_role_both_allow_is_refused_in_words(alice, acme):
    """A billing token cannot become a member's (a member books; billing does not), nor
    a billing one where the user is a member (billing reads invoices; members do not)."""
    secret = api_token_create(user=alice, name="accounts", role=Role.BILLING)
    refused = _bearer(secret).post(
        "/api/v1/auth/token/exchange/", {"team": acme.pk}, HTTP_ACCEPT_LANGUAGE="pl"
    )
    assert refused.status_code == 403 and "rolę" in refused.json()["errors"]["role"][0]
    assert ApiToken.objects.get().revoked_at is None


def test_a_team_of_someone_else_is_refused_and_the_token_lives(alice, bob):
    bobs = team_create(user=bob, name="Bob's")
    secret = api_token_create(user=alice, name="laptop")
    refused = _bearer(secret).post("/api/v1/auth/token/exchange/", {"team": bobs.pk})
    assert refused.status_code == 403 and list(refused.json()["errors"]) == ["team"]
    assert _bearer(secret).get("/api/v1/ledger/").status_code == 200


def test_a_signed_in_page_session_has_no_token_to_exchange(alice, acme, client):
    client.force_login(alice)
    assert client.get("/api/v1/auth/token/current/").status_code == 403
    assert client.post("/api/v1/auth/token/exchange/", {"team": acme.pk}).status_code == 403
    assert not ApiToken.objects.exists()


def test_without_a_credential_both_answer_401(acme):
    api = APIClient()
    assert api.get("/api/v1/auth/token/current/").status_code == 401
    assert api.post("/api/v1/auth/token/exchange/", {"team": acme.pk}).status_code == 401
