"""Teams own rentals: every role tried on every action, invitations, the last owner, a
spend limit that parallel bookings cannot cross, and idempotency scoped to the team."""

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from rest_framework.test import APIClient

from accounts.errors import LastOwner
from accounts.models import Invitation, Membership, Role
from accounts.roles import acting_as, personal_team
from accounts.services.teams import (
    invitation_create,
    membership_remove,
    membership_role_set,
    team_create,
    team_spend_limit_set,
)
from accounts.services.tokens import api_token_create
from rentals.errors import NoCapacity, SpendLimitReached
from rentals.models import Allocation, LedgerEntry
from rentals.services import allocation_book, quote_create
from tests.support.booking import book
from tests.support.factories.accounts import team_with

QUOTE = {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1}


def _link(secret):
    return f"/invitations/{secret}/"


def _team_with_roles(django_user_model, owner):
    """Acme, owned by `owner`, with a member, a billing and a viewer member."""
    team = team_create(user=owner, name="Acme")
    people = {"owner": owner}
    for role in ("member", "billing", "viewer"):
        people[role] = django_user_model.objects.create_user(
            role, f"{role}@acme.test", "pw-x-12345678"
        )
        Membership.objects.create(team=team, user=people[role], role=role)
    return team, people


def _client(user, team):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t', team=team)}"
    )
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["owner", "member", "billing", "viewer"])
def test_each_role_on_each_action(catalog, alice, django_user_model, role):
    team, people = _team_with_roles(django_user_model, alice)
    running = book(people["owner"], model="h100", count=1, period="day", team=team)
    api = _client(people[role], team)
    may_buy = role in ("owner", "member")

    quote = api.post("/api/v1/quotes/", QUOTE)
    assert quote.status_code == (201 if may_buy else 403)
    owners_quote = quote_create(acting=acting_as(alice, team), **QUOTE)
    booked = api.post(
        "/api/v1/bookings/", {"quote": str(owners_quote.pk)}, HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert booked.status_code == (201 if may_buy else 403)
    stop = api.post(f"/api/v1/allocations/{running.pk}/stop/")
    assert stop.status_code == (200 if may_buy else 403)
    listed = api.get("/api/v1/allocations/")
    assert listed.status_code == 200 and str(running.pk) in listed.content.decode()
    ledger = api.get("/api/v1/ledger/")
    assert ledger.status_code == (403 if role == "viewer" else 200)
    statement = api.get("/api/v1/ledger/csv/")
    assert statement.status_code == (403 if role == "viewer" else 200)
    invite = api.post(
        f"/api/v1/teams/{team.pk}/invitations/", {"email": "new@acme.test", "role": "viewer"}
    )
    assert invite.status_code == (201 if role == "owner" else 403)
    running.refresh_from_db()
    assert running.state == ("stopped" if may_buy else "running")


@pytest.mark.django_db
def test_teams_cannot_see_each_others_rentals(catalog, alice, bob):
    alices = book(alice, model="h100", count=1, period="day")
    api = _client(bob, personal_team(bob))
    assert api.get(f"/api/v1/allocations/{alices.pk}/").status_code == 404
    assert api.post(f"/api/v1/allocations/{alices.pk}/stop/").status_code == 404
    assert str(alices.pk) not in api.get("/api/v1/ledger/").content.decode()
    assert api.get(f"/api/v1/teams/{personal_team(alice).pk}/members/").status_code == 404


@pytest.mark.django_db
def test_a_token_acts_for_its_team_with_no_more_than_its_role(catalog, alice, bob):
    team = team_with(alice, {bob: Role.VIEWER})
    with pytest.raises(Exception, match="cannot do more"):
        api_token_create(user=bob, name="x", team=team, role=Role.MEMBER)
    narrowed = _client_with_role(alice, team, Role.VIEWER)
    assert narrowed.post("/api/v1/quotes/", QUOTE).status_code == 403
    Membership.objects.filter(team=team, user=bob).delete()
    assert APIClient().get("/api/v1/teams/").status_code == 401


def _client_with_role(user, team, role):
    client = APIClient()
    secret = api_token_create(user=user, name="t", team=team, role=role)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.mark.django_db
def test_an_invited_colleague_joins_in_the_role_and_the_link_works_once(alice, bob, client):
    team = team_create(user=alice, name="Acme")
    _invitation, secret = invitation_create(
        acting=acting_as(alice, team), email="bob@example.com", role="member",
        accept_url=_link,
    )  # fmt: skip
    client.force_login(bob)
    assert "Acme" in client.get(_link(secret)).content.decode()
    client.post(_link(secret))
    assert Membership.objects.get(team=team, user=bob).role == "member"
    assert client.get(_link(secret)).status_code == 410  # used
    assert Invitation.objects.get().accepted_by == bob


@pytest.mark.django_db
def test_only_owners_invite(alice, bob):
    team = team_with(alice, {bob: Role.MEMBER})
    with pytest.raises(Exception, match="cannot do this"):
        invitation_create(
            acting=acting_as(bob, team), email="x@y.z", role="viewer", accept_url=_link
        )


@pytest.mark.django_db
def test_the_last_owner_is_protected_by_the_service_and_the_database(alice, bob):
    team = team_create(user=alice, name="Acme")
    owner = Membership.objects.get(team=team, user=alice)
    with pytest.raises(LastOwner):
        membership_role_set(acting=acting_as(alice, team), membership=owner, role=Role.MEMBER)
    with pytest.raises(LastOwner):
        membership_remove(acting=acting_as(alice, team), membership=owner)
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.filter(pk=owner.pk).update(role=Role.VIEWER)
        with connection.cursor() as cursor:  # the deferred trigger, fired now, not at commit
            cursor.execute("SET CONSTRAINTS accounts_team_keeps_an_owner IMMEDIATE")
    Membership.objects.create(team=team, user=bob, role=Role.OWNER)
    membership_remove(acting=acting_as(alice, team), membership=owner)
    assert list(team.memberships.values_list("user__username", "role")) == [("bob", "owner")]


@pytest.mark.django_db
def test_spend_limit_refuses_a_purchase_past_it_and_names_the_figures(catalog, alice, alice_api):
    team = personal_team(alice)
    team_spend_limit_set(acting=acting_as(alice), limit=Decimal("20.00"))
    book(alice, model="l4", count=1, period="day")  # 16.24 (13.20 + VAT) of 20.00
    quote = quote_create(acting=acting_as(alice), **QUOTE)
    response = alice_api.post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert response.status_code == 409 and response.json()["code"] == "spend_limit_reached"
    assert response.json()["limit"] == "20.00" and response.json()["month_spend"] == "16.24"
    assert LedgerEntry.objects.filter(team=team).count() == 1
    assert team.spend_limit_changes.get().new_limit == Decimal("20.00")


@pytest.mark.django_db(transaction=True)
def test_parallel_bookings_never_cross_the_spend_limit(catalog, alice):
    acting = acting_as(alice)
    team_spend_limit_set(acting=acting, limit=Decimal("35.00"))  # two L4 days of 16.24 gross
    quotes = [quote_create(acting=acting, **QUOTE) for _ in range(4)]
    barrier = threading.Barrier(4)

    def attempt(quote):
        barrier.wait()
        try:
            allocation_book(acting=acting_as(alice), quote=quote)
            return "booked"
        except SpendLimitReached:
            return "limit"
        except NoCapacity:
            return "full"
        finally:
            connection.close()

    with ThreadPoolExecutor(4) as pool:
        outcomes = sorted(pool.map(attempt, quotes))
    assert outcomes == ["booked", "booked", "limit", "limit"]
    charged = sum(LedgerEntry.objects.values_list("amount", flat=True))
    assert charged == Decimal("32.48") <= Decimal("35.00")


@pytest.mark.django_db
def test_two_members_retrying_one_purchase_buy_once(catalog, alice, bob):
    team = team_with(alice, {bob: Role.MEMBER})
    quote = quote_create(acting=acting_as(alice, team), **QUOTE)
    key = str(uuid.uuid4())
    first = _client(alice, team).post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, HTTP_IDEMPOTENCY_KEY=key
    )
    again = _client(bob, team).post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, HTTP_IDEMPOTENCY_KEY=key
    )
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true" and again.content == first.content
    assert Allocation.objects.filter(team=team).count() == 1
