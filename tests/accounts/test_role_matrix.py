"""The role matrix, generated from the one table in accounts/roles.py: every action × every
role × every kind of credential, over the API and the pages, each tried for real and judged
by what it changed or showed, never by the table itself.

Credentials: a session acting for the team; a token of the team; a token of the same
person's other team (their personal one); a token, and a session, of a member removed
since (removed as the admin does, a plain delete, so nothing but the access check stands
in the way). Only the first two may do anything, and then only what the role allows.

A test of the test flips each cell of the table in turn and shows that the comparison
finds exactly that cell.
"""

import uuid
from dataclasses import dataclass, field

import pytest
from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret
from django.db import transaction
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import Invitation, Membership, Role, Team
from accounts.roles import ROLES, TABLE, TEAM_SESSION_KEY, Action, acting_as
from accounts.services.teams import team_create
from accounts.services.tokens import api_token_create
from core.problems import PROBLEM_CONTENT_TYPE
from invoices.models import Invoice
from invoices.services import invoices_number
from rentals.models import Allocation, StatementExport
from rentals.services import quote_create
from rentals.services.exports import statement_export_request, statement_export_run
from tests.support.booking import book
from tests.support.factories.accounts import person
from tests.support.factories.catalog import catalog_setup
from tests.support.factories.invoices import pln_rates_create

# The observation is made once for the module (fixture `seen`); the mark has the test
# database set up for it.
pytestmark = pytest.mark.django_db

API_CREDENTIALS = ("session", "token", "token_other_team", "token_removed", "session_removed")
PAGE_CREDENTIALS = ("session", "session_removed")
GRANTING = frozenset({"session", "token"})
QUOTE = {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1}


@dataclass
class World:
    team: Team
    founder: object
    spare: Membership
    running: Allocation
    export: StatementExport | None = None
    clients: dict = field(default_factory=dict)  # (surface, role, credential) → client


def _api_token_client(user, team):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='m', team=team)}"
    )
    return client


def _session_client(user, team, surface):
    client = APIClient() if surface == "api" else Client()
    client.force_login(user)
    session = client.session
    session[TEAM_SESSION_KEY] = team.pk
    session.save()
    return client


def _world() -> World:
    """Acme: a founding owner, a spare viewer to act on, and for every role one member who
    stays and one who is removed after their credentials were made. Everyone has a second
    factor, so the one action that needs it of its actor is judged by the role alone."""
    catalog_setup()
    pln_rates_create()  # the running allocation's USD invoice carries its VAT in PLN
    founder = person("founder", "pw-founder-1234")
    team = team_create(user=founder, name="Acme")
    spare = Membership.objects.create(
        team=team, user=person("spare", "pw-spare-12345"), role=Role.VIEWER
    )
    world = World(team=team, founder=founder, spare=spare, running=None)
    removed = []
    for role in ROLES:
        for kind in ("stays", "removed"):
            user = person(f"{role}-{kind}", "pw-matrix-12345")
            TOTP.activate(user, generate_totp_secret())
            membership = Membership.objects.create(team=team, user=user, role=role)
            prefix = "" if kind == "stays" else "_removed"
            world.clients["api", role, f"token{prefix}"] = _api_token_client(user, team)
            world.clients["api", role, f"session{prefix}"] = _session_client(user, team, "api")
            world.clients["page", role, f"session{prefix}"] = _session_client(user, team, "page")
            if kind == "stays":
                world.clients["api", role, "token_other_team"] = _api_token_client(user, None)
            else:
                removed.append(membership.pk)
    Membership.objects.filter(pk__in=removed).delete()
    world.running = book(founder, model="h100", count=1, period="day", team=team)
    invoices_number()  # after the commit, by a worker: the reads below look for its number
    world.export = statement_export_request(acting=acting_as(founder, team), language="en")
    statement_export_run(export_id=world.export.pk)
    return world


def _quote(world):
    return quote_create(acting=acting_as(world.founder, world.team), **QUOTE)


def _team_url(world, tail=""):
    return f"/api/v1/teams/{world.team.pk}/{tail}"


def _page(world):
    return f"/teams/{world.team.pk}/"


# Each probe does the action as the client and says whether it took effect: a write by
# the rows it changed, a read by the data it returned. (response, took_effect)
def _api_read(c, w):
    r = c.get(f"/api/v1/allocations/{w.running.pk}/")
    return r, r.status_code == 200 and r.json()["id"] == str(w.running.pk)


def _api_book(c, w):
    before = Allocation.objects.count()
    r = c.post(
        "/api/v1/bookings/", {"quote": str(_quote(w).pk)}, HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    return r, Allocation.objects.count() == before + 1


def _api_act(c, w):
    r = c.post(f"/api/v1/allocations/{w.running.pk}/stop/")
    return r, Allocation.objects.get(pk=w.running.pk).state == "stopped"


def _api_read_ledger(c, w):
    r = c.get("/api/v1/ledger/")
    return r, r.status_code == 200 and str(w.running.pk) in r.content.decode()


def _invoice_number(w) -> str:
    return Invoice.objects.get(ledger_entry__allocation=w.running).display_number


def _api_read_invoices(c, w):
    r = c.get("/api/v1/invoices/")
    return r, r.status_code == 200 and _invoice_number(w) in r.content.decode()


def _api_read_team(c, w):
    r = c.get(_team_url(w, "members/"))
    return r, r.status_code == 200 and "spare" in r.content.decode()


def _api_invite(c, w):
    r = c.post(_team_url(w, "invitations/"), {"email": "new@acme.test", "role": "viewer"})
    return r, Invitation.objects.filter(team=w.team).exists()


def _api_set_role(c, w):
    r = c.patch(_team_url(w, f"members/{w.spare.pk}/"), {"role": "member"}, format="json")
    return r, Membership.objects.get(pk=w.spare.pk).role == "member"


def _api_remove_member(c, w):
    r = c.delete(_team_url(w, f"members/{w.spare.pk}/"))
    return r, not Membership.objects.filter(pk=w.spare.pk).exists()


def _api_set_spend_limit(c, w):
    r = c.patch(_team_url(w), {"monthly_spend_limit": "100.00"}, format="json")
    return r, Team.objects.get(pk=w.team.pk).monthly_spend_limit is not None


def _api_transfer(c, w):
    r = c.post(_team_url(w, "transfer/"), {"member": w.spare.pk}, format="json")
    return r, Membership.objects.get(pk=w.spare.pk).role == "owner"


def _api_require_second_factor(c, w):
    r = c.patch(_team_url(w), {"require_second_factor": True}, format="json")
    return r, Team.objects.get(pk=w.team.pk).require_second_factor


BUYER = {"legal_name": "Acme GmbH", "address": "Hauptstr. 1", "country": "DE",
         "vat_id": "DE136695976"}  # fmt: skip


def _api_set_buyer(c, w):
    r = c.patch(_team_url(w), BUYER, format="json")
    return r, Team.objects.get(pk=w.team.pk).vat_id == BUYER["vat_id"]


def _api_read_audit(c, w):
    r = c.get("/api/v1/audit/")
    return r, r.status_code == 200 and str(w.running.pk) in r.content.decode()


def _page_read(c, w):
    r = c.get(f"/allocations/{w.running.pk}/")
    return r, r.status_code == 200 and str(w.running.pk) in r.content.decode()


def _page_book(c, w):
    before = Allocation.objects.count()
    r = c.post(f"/quotes/{_quote(w).pk}/book/", {"idempotency_key": str(uuid.uuid4())})
    return r, Allocation.objects.count() == before + 1


def _page_act(c, w):
    r = c.post(f"/allocations/{w.running.pk}/stop/")
    return r, Allocation.objects.get(pk=w.running.pk).state == "stopped"


def _page_read_ledger(c, w):
    r = c.get("/statement/")
    return r, r.status_code == 200 and "H100" in r.content.decode()


def _page_read_invoices(c, w):
    r = c.get("/invoices/")
    return r, r.status_code == 200 and _invoice_number(w) in r.content.decode()


def _page_read_team(c, w):
    r = c.get(_page(w))
    return r, r.status_code == 200 and "spare" in r.content.decode()


def _page_invite(c, w):
    r = c.post(_page(w), {"invite": "1", "email": "new@acme.test", "role": "viewer"})
    return r, Invitation.objects.filter(team=w.team).exists()


def _page_set_role(c, w):
    r = c.post(_page(w), {"set_role": "1", "membership": w.spare.pk, "role": "member"})
    return r, Membership.objects.get(pk=w.spare.pk).role == "member"


def _page_remove_member(c, w):
    r = c.post(_page(w), {"remove": "1", "membership": w.spare.pk})
    return r, not Membership.objects.filter(pk=w.spare.pk).exists()


def _page_set_spend_limit(c, w):
    r = c.post(_page(w), {"spend_limit": "1", "limit": "100.00"})
    return r, Team.objects.get(pk=w.team.pk).monthly_spend_limit is not None


def _page_transfer(c, w):
    r = c.post(_page(w), {"transfer": "1", "membership": w.spare.pk})
    return r, Membership.objects.get(pk=w.spare.pk).role == "owner"


def _page_require_second_factor(c, w):
    r = c.post(_page(w), {"second_factor_rule": "1", "required": "1"})
    return r, Team.objects.get(pk=w.team.pk).require_second_factor


def _page_set_buyer(c, w):
    r = c.post(_page(w), {"buyer": "1", **BUYER})
    return r, Team.objects.get(pk=w.team.pk).vat_id == BUYER["vat_id"]


def _page_read_audit(c, w):
    r = c.get(f"/teams/{w.team.pk}/audit/")
    return r, r.status_code == 200 and str(w.running.pk) in r.content.decode()


# Acme has rentals, so no role deletes it: a delete the role allows is refused for the
# team's history instead (409 team_has_history), which counts as the role check passed.
def _api_delete_team(c, w):
    r = c.delete(_team_url(w))
    history = r.status_code == 409 and r.json().get("code") == "team_has_history"
    return r, history or not Team.objects.filter(pk=w.team.pk).exists()


def _page_delete_team(c, w):
    r = c.post(_page(w), {"delete_team": "1"})
    said = [str(m) for m in r.wsgi_request._messages] if r.status_code == 302 else []
    history = any("has rentals, charges or invoices" in m for m in said)
    return r, history or not Team.objects.filter(pk=w.team.pk).exists()


def _card(w):
    from payments.models import Card  # noqa: PLC0415

    return Card.objects.create(
        team=w.team, processor_id=f"pm_probe{uuid.uuid4().hex[:12]}", brand="visa",
        last4="4242", exp_month=12, exp_year=2031,
    )  # fmt: skip


def _removed(card) -> bool:
    card.refresh_from_db()
    return card.removed_at is not None


def _api_manage_cards(c, w):
    card = _card(w)
    r = c.delete(_team_url(w, f"cards/{card.pk}/"))
    return r, _removed(card)


def _page_manage_cards(c, w):
    card = _card(w)
    r = c.post(f"/teams/{w.team.pk}/billing/", {"remove": str(card.pk)})
    return r, _removed(card)


def _exported(r, w) -> bool:
    return r.status_code == 200 and str(w.running.pk) in b"".join(r.streaming_content).decode()


def _api_export_ledger(c, w):
    r = c.get(f"/api/v1/ledger/exports/{w.export.pk}/csv/")
    return r, _exported(r, w)


def _page_export_ledger(c, w):
    r = c.get(f"/statement/exports/{w.export.pk}/")
    return r, _exported(r, w)


PROBES = {
    surface: {action: globals()[f"_{surface}_{action.value}"] for action in Action}
    for surface in ("api", "page")
}
CREDENTIALS = {"api": API_CREDENTIALS, "page": PAGE_CREDENTIALS}


# The statement, the invoices and the audit log answer for whichever team the credential
# acts for: another team's credential reads that team's own, and Acme's rows are simply not in
# it.
OWN_TEAM_LISTS = frozenset({Action.READ_LEDGER, Action.READ_INVOICES, Action.READ_AUDIT})


def _refused_in_words(surface, action, response) -> bool:
    """A refusal says why: a problem document on the API; on a page a 403/404 page, or
    the page it sends the person back to with the reason as a message."""
    if action in OWN_TEAM_LISTS and response.status_code == 200:
        return True
    if surface == "api":
        body = response.json() if response.content else {}
        return (
            response.status_code in (400, 401, 403, 404)
            and response["Content-Type"] == PROBLEM_CONTENT_TYPE
            and bool(body.get("detail"))
        )
    if response.status_code in (403, 404):
        return bool(response.content)
    messages = (
        [str(m) for m in response.wsgi_request._messages] if response.status_code == 302 else []
    )
    return bool(messages)


def observe(world) -> dict:
    """What every cell did: {(surface, action, role, credential): (took_effect, in_words)},
    each probe in a savepoint rolled back after it, so each starts from the same world."""
    seen = {}
    for surface, probes in PROBES.items():
        for action, probe in probes.items():
            for role in ROLES:
                for credential in CREDENTIALS[surface]:
                    client = world.clients[surface, role, credential]
                    with transaction.atomic():
                        response, took_effect = probe(client, world)
                        transaction.set_rollback(True)
                    in_words = took_effect or _refused_in_words(surface, action, response)
                    seen[surface, action, role, credential] = (took_effect, in_words)
    return seen


def mismatches(table, seen) -> list:
    """The cells where what happened differs from what `table` says should."""
    out = []
    for (surface, action, role, credential), (took_effect, _words) in seen.items():
        expected = table[action][ROLES.index(role)] and credential in GRANTING
        if took_effect != expected:
            out.append((surface, action, role, credential))
    return out


@pytest.fixture(scope="module")
def seen(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), transaction.atomic():
        observed = observe(_world())
        transaction.set_rollback(True)
    return observed


def test_every_cell_does_what_the_table_says(seen):
    assert len(seen) == len(Action) * len(ROLES) * (len(API_CREDENTIALS) + len(PAGE_CREDENTIALS))
    assert mismatches(TABLE, seen) == []
    assert [cell for cell, (_effect, words) in seen.items() if not words] == []


@pytest.mark.parametrize("action", list(Action))
def test_the_matrix_test_finds_any_single_flipped_cell(seen, action):
    for column, role in enumerate(ROLES):
        row = list(TABLE[action])
        row[column] = not row[column]
        wrong = {**TABLE, action: tuple(row)}
        found = mismatches(wrong, seen)
        granted = {c for c in CREDENTIALS["api"] if c in GRANTING}
        expected = {("api", action, role, c) for c in granted} | {("page", action, role, "session")}
        assert set(found) == expected, (action, role)
