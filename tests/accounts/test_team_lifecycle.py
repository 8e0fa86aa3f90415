"""The team pages: a team without history can be deleted and one with history
stays (in words, nothing changed); inviting an address again renews its one invitation;
the invitation form answers with a redirect; leaving asks about leaving; the invitation's
sign-up has the invited address filled in; a form made for a team one has left is refused."""

import re

import pytest

from accounts.errors import PersonalTeam, TeamHasHistory
from accounts.models import ApiToken, Invitation, Membership, Role, Team
from accounts.roles import acting_as
from accounts.services.teams import invitation_create, team_create, team_delete
from accounts.services.tokens import api_token_create
from rentals.models import Allocation
from tests.support.booking import book
from tests.support.factories.accounts import person, team_with

pytestmark = pytest.mark.django_db


def _link(secret):
    return f"http://testserver/invitations/{secret}/"


def test_a_team_without_history_is_deleted_with_what_is_only_its_own(alice, bob):
    team = team_with(alice, {bob: Role.MEMBER})
    invitation_create(acting=acting_as(alice, team), email="c@x.test", role="viewer",
                      accept_url=_link)  # fmt: skip
    api_token_create(user=bob, name="ci", team=team)
    assert team_delete(acting=acting_as(alice, team)) == "Acme"
    assert not Team.objects.filter(pk=team.pk).exists()
    assert not Membership.objects.filter(team_id=team.pk).exists()
    assert not Invitation.objects.filter(team_id=team.pk).exists()
    assert not ApiToken.objects.filter(team_id=team.pk).exists()


def test_a_team_with_history_stays_and_only_an_owner_may_try(catalog, alice, bob):
    team = team_with(alice, {bob: Role.MEMBER})
    book(alice, model="l4", count=1, period="day", team=team)
    with pytest.raises(TeamHasHistory) as refused:
        team_delete(acting=acting_as(alice, team))
    assert "Acme has rentals, charges or invoices" in refused.value.detail
    assert Team.objects.filter(pk=team.pk).exists()
    assert Membership.objects.filter(team=team).count() == 2
    assert Allocation.objects.filter(team=team).count() == 1
    with pytest.raises(Exception, match="cannot do this"):
        team_delete(acting=acting_as(bob, team))
    with pytest.raises(PersonalTeam):
        team_delete(acting=acting_as(alice))


def test_deleting_through_the_api_and_the_page(catalog, alice, alice_api, client):
    empty, used = team_create(user=alice, name="Empty"), team_create(user=alice, name="Used")
    book(alice, model="l4", count=1, period="day", team=used)
    refused = alice_api.delete(f"/api/v1/teams/{used.pk}/")
    assert (refused.status_code, refused.json()["code"]) == (409, "team_has_history")
    assert alice_api.delete(f"/api/v1/teams/{empty.pk}/").status_code == 204
    assert not Team.objects.filter(pk=empty.pk).exists()

    client.force_login(alice)
    again = team_create(user=alice, name="Again")
    page = client.get(f"/teams/{again.pk}/").content.decode()
    assert 'id="delete-team-button"' in page
    answer = client.post(f"/teams/{again.pk}/", {"delete_team": "1"}, follow=True)
    assert answer.redirect_chain[-1][0] == "/teams/"
    assert "Again is deleted." in answer.content.decode()
    answer = client.post(f"/teams/{used.pk}/", {"delete_team": "1"}, follow=True)
    assert "Used has rentals, charges or invoices" in answer.content.decode()
    assert Team.objects.filter(pk=used.pk).exists()


def test_inviting_the_same_address_again_renews_its_one_invitation(alice, alice_api):
    team = team_create(user=alice, name="Acme")
    acting = acting_as(alice, team)
    first, old_secret = invitation_create(acting=acting, email="Olek@Example.com",
                                          role="viewer", accept_url=_link)  # fmt: skip
    again, new_secret = invitation_create(acting=acting, email="olek@example.com",
                                          role="member", accept_url=_link)  # fmt: skip
    assert (first.pk, first.renewed, again.renewed) == (again.pk, False, True)
    assert Invitation.objects.filter(team=team).count() == 1
    kept = Invitation.objects.get(team=team)
    assert (kept.email, kept.role) == ("olek@example.com", "member")
    assert old_secret != new_secret
    answer = alice_api.post(f"/api/v1/teams/{team.pk}/invitations/",
                            {"email": "OLEK@example.com", "role": "billing"})  # fmt: skip
    assert answer.status_code == 201
    assert Invitation.objects.filter(team=team).count() == 1
    assert answer.json()["id"] == first.pk


def test_the_invitation_form_redirects_and_shows_its_link_once(alice, client):
    team = team_create(user=alice, name="Acme")
    client.force_login(alice)
    answer = client.post(f"/teams/{team.pk}/", {"invite": "1", "email": "o@x.test",
                                                "role": "member"})  # fmt: skip
    assert (answer.status_code, answer["Location"]) == (302, f"/teams/{team.pk}/")
    page = client.get(f"/teams/{team.pk}/").content.decode()
    assert 'id="invitation-link"' in page and "Invitation sent." in page
    assert 'id="invitation-link"' not in client.get(f"/teams/{team.pk}/").content.decode()
    client.post(f"/teams/{team.pk}/", {"invite": "1", "email": "O@x.test", "role": "viewer"})
    assert "already had an invitation" in client.get(f"/teams/{team.pk}/").content.decode()
    assert Invitation.objects.filter(team=team).count() == 1


def test_creating_a_team_says_you_now_act_for_it(alice, client):
    client.force_login(alice)
    page = client.post("/teams/", {"name": "Night"}, follow=True).content.decode()
    assert "Night is made, and you now act for it" in page


def test_leaving_asks_about_leaving_and_removing_about_the_member(alice, bob, client):
    team = team_with(alice, {bob: Role.OWNER})
    client.force_login(alice)
    page = client.get(f"/teams/{team.pk}/").content.decode()
    assert "Leave Acme? You can only come back if an owner invites you again." in page
    assert "Remove bob from the team?" in page
    assert "Remove this member from the team?" not in page
    answer = client.post(f"/teams/{team.pk}/", {"remove": "1", "membership": Membership.objects.get(team=team, user=alice).pk})  # fmt: skip
    assert (answer.status_code, answer["Location"]) == (302, "/teams/")


def test_the_invitations_sign_up_fills_in_the_invited_address(alice, client):
    team = team_create(user=alice, name="Acme")
    _invitation, secret = invitation_create(
        acting=acting_as(alice, team), email="newcomer@example.com", role="member",
        accept_url=_link,
    )  # fmt: skip
    assert client.get(f"/invitations/{secret}/").status_code == 200
    page = client.get("/account/signup/").content.decode()
    field = re.search(r'<input[^>]*name="email"[^>]*>', page).group(0)
    assert 'value="newcomer@example.com"' in field
    fresh = client.__class__()
    field = re.search(
        r'<input[^>]*name="email"[^>]*>', fresh.get("/account/signup/").content.decode()
    )
    assert "value=" not in field.group(0)


def test_a_form_made_for_a_team_one_has_left_changes_nothing(catalog, alice, client):
    owner = person("owner", "pw-owner-123456")
    team = team_create(user=owner, name="Acme")
    membership = Membership.objects.create(team=team, user=alice, role=Role.MEMBER)
    allocation = book(owner, model="l4", count=1, period="day", team=team)
    membership.delete()
    client.force_login(alice)
    answer = client.post(f"/allocations/{allocation.pk}/stop/", {"acting_team": team.pk})
    assert answer.status_code == 403
    assert "no longer belong to" in answer.content.decode()
    allocation.refresh_from_db()
    assert allocation.state == "running"
