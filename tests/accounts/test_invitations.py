"""An invitation reaches only the invited: its address, confirmed, is the key; one link
makes at most one membership however many post it at once; a used, revoked or expired
link answers 410 in words."""

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import Invitation, Membership
from accounts.roles import acting_as
from accounts.services.teams import invitation_create, team_create
from tests.support.factories.accounts import person


def _invite(owner, email="bob@example.com", role="owner"):
    team = team_create(user=owner, name="Acme")
    _invitation, secret = invitation_create(
        acting=acting_as(owner, team), email=email, role=role, accept_url=_link
    )
    return team, secret


def _link(secret):
    return f"/invitations/{secret}/"


def _signed_in(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_link_for_someone_else_is_refused_and_changes_nothing(alice, bob):
    team, secret = _invite(alice, email="carol@example.com")
    page = _signed_in(bob).get(_link(secret))
    assert (
        "c••••@example.com" in page.content.decode()
        and "Join the team" not in page.content.decode()
    )
    refused = _signed_in(bob).post(_link(secret))
    assert refused.status_code == 403
    assert "This invitation was sent to c••••@example.com" in refused.content.decode()
    assert not Membership.objects.filter(team=team, user=bob).exists()
    assert Invitation.objects.get().accepted_at is None


@pytest.mark.django_db
def test_an_unconfirmed_address_is_confirmed_before_joining(alice, bob):
    team, secret = _invite(alice, email="bob@work.example")
    EmailAddress.objects.create(user=bob, email="bob@work.example", verified=False)
    refused = _signed_in(bob).post(_link(secret))
    assert (
        refused.status_code == 403 and "Confirm bob@work.example first" in refused.content.decode()
    )
    EmailAddress.objects.filter(email="bob@work.example").update(verified=True)
    joined = _signed_in(bob).post(_link(secret))
    assert joined.status_code == 302
    assert Membership.objects.get(team=team, user=bob).role == "owner"


@pytest.mark.django_db
def test_a_new_person_signs_up_confirms_and_comes_back_to_the_invitation(alice, client):
    team, secret = _invite(alice, email="carol@example.com", role="member")
    client.get(_link(secret))
    client.post(
        "/account/signup/",
        {"email": "carol@example.com", "username": "carol", "password1": "a-long-password-1",
         "password2": "a-long-password-1"},
    )  # fmt: skip
    confirm = re.search(r"https?://[^/\s]+(/\S+)", mail.outbox[-1].body).group(1)
    back = client.post(confirm)
    assert back.url == _link(secret)
    assert "Join the team" in client.get(back.url).content.decode()
    client.post(_link(secret))
    assert Membership.objects.get(team=team, user__username="carol").role == "member"


@pytest.mark.django_db
@pytest.mark.parametrize("spoil", ["used", "revoked", "expired"])
def test_a_spent_link_answers_410_in_words(alice, bob, spoil):
    _team, secret = _invite(alice)
    if spoil == "used":
        _signed_in(bob).post(_link(secret))
    elif spoil == "revoked":
        Invitation.objects.update(revoked_at=timezone.now())
    else:
        Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    for answer in (_signed_in(bob).get(_link(secret)), _signed_in(bob).post(_link(secret))):
        assert answer.status_code == 410
        assert "This invitation was used, revoked or has expired." in answer.content.decode()


@pytest.mark.django_db
def test_owners_list_and_revoke_invitations_through_the_api(alice, alice_api):
    team, _secret = _invite(alice, email="carol@example.com")
    listed = alice_api.get(f"/api/v1/teams/{team.pk}/invitations/").json()
    assert [i["email"] for i in listed] == ["carol@example.com"] and "accept_url" not in listed[0]
    url = f"/api/v1/teams/{team.pk}/invitations/{listed[0]['id']}/"
    assert alice_api.delete(url).status_code == 204
    again = alice_api.delete(url)
    assert again.status_code == 410 and again.json()["code"] == "invitation_invalid"
    assert alice_api.get(f"/api/v1/teams/{team.pk}/invitations/").json() == []


REFUSALS = (
    "This invitation was sent to b••@example.com",  # not yours
    "This invitation was used, revoked or has expired.",  # gone by the time it was read
    "You are already a member of Acme.",  # joined a moment ago, by another click
)


def _in_words(page: str) -> bool:
    return any(words in page for words in REFUSALS)


def _race(clients, url):
    barrier = threading.Barrier(len(clients))

    def post(client):
        barrier.wait()
        try:
            response = client.post(url)
            return response.status_code, response.content.decode()
        finally:
            connection.close()

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(post, clients))


@pytest.mark.django_db(transaction=True)
def test_twelve_people_posting_one_link_make_one_membership(alice, bob):
    team, secret = _invite(alice)
    others = [person(f"guest{n}", "pw-guest-123456") for n in range(11)]
    answers = _race([_signed_in(u) for u in [bob, *others]], _link(secret))
    assert sorted(status for status, _page in answers)[0] == 302
    refusals = [page for status, page in answers if status != 302]
    assert len(refusals) == 11 and all(_in_words(page) for page in refusals)
    assert list(Membership.objects.filter(team=team).values_list("user__username", flat=True)) == [
        "alice", "bob"
    ]  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_invited_posting_twelve_times_at_once_joins_once(alice, bob):
    team, secret = _invite(alice)
    answers = _race([_signed_in(bob) for _ in range(12)], _link(secret))
    assert sorted(status for status, _page in answers)[0] == 302
    refusals = [(status, page) for status, page in answers if status != 302]
    assert len(refusals) == 11 and {status for status, _page in refusals} <= {409, 410}
    assert all(_in_words(page) for _status, page in refusals)
    assert Membership.objects.filter(team=team, user=bob).count() == 1
    assert Invitation.objects.get().accepted_by == bob
