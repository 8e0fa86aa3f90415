"""The audit log: every tracked action is recorded with who (a person, an API token, the
system and its task) and from where; it is append-only and kept for AUDIT_RETENTION_DAYS;
a team reads only its own rows, as its role allows, in its language."""

import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken, Membership, Role
from accounts.roles import acting_as
from accounts.services.teams import team_create
from accounts.services.tokens import api_token_create
from audit.errors import BadAuditFilter
from audit.models import AllocationAudit, MembershipAudit, TeamAudit
from audit.selectors import audit_filter, audit_page
from audit.services import audit_prune
from catalog.models import GpuModel, RentalPeriod
from catalog.services import gpu_price_set
from core.db import db_now
from core.pagination import cursor_write
from rentals.models import AllocationState
from rentals.services import quote_create
from rentals.tasks import allocations_enforce_task
from telemetry.models import Flag, FlagKind, Severity
from tests.support.booking import book, end_paid_periods_a_minute_ago
from tests.support.factories.accounts import person, team_with
from tests.support.operators import OPERATIONS, operator
from tests.support.ssh import ed25519_key, public_line

pytestmark = pytest.mark.django_db


def _token_api(user, team=None, ip="203.0.113.7"):
    client = APIClient(REMOTE_ADDR=ip)
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='ci', team=team)}"
    )
    return client


def _session(user, ip="198.51.100.4", language="en"):
    client = Client(REMOTE_ADDR=ip, HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(user)
    return client


def _rows(team, **filters):
    return audit_page(team_id=team.pk if team else None, flt=audit_filter(**filters)).rows


def _personal(user):
    return acting_as(user).team


def test_a_booking_stop_and_start_on_the_pages_record_the_person_and_address(catalog, alice):
    web = _session(alice)
    quote = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day", period_count=1
    )
    booked = web.post(f"/quotes/{quote.pk}/book/", {"idempotency_key": str(uuid.uuid4())})
    assert booked.status_code == 302
    allocation = AllocationAudit.objects.get(pgh_label="booked").pgh_obj_id
    assert web.post(f"/allocations/{allocation}/stop/").status_code == 302
    assert web.post(f"/allocations/{allocation}/start/").status_code == 302

    events = list(AllocationAudit.objects.order_by("pgh_id"))
    assert [(e.pgh_label, e.state) for e in events] == [
        ("booked", "running"), ("state", "stopped"), ("state", "running"),
    ]  # fmt: skip
    assert {e.pgh_context["user"] for e in events} == {alice.pk}
    assert {e.pgh_context["ip"] for e in events} == {"198.51.100.4"}
    assert events[1].pgh_context["url"] == f"/allocations/{allocation}/stop/"
    assert events[1].pgh_context["method"] == "POST"

    rows = _rows(_personal(alice))
    assert [(r.action, r.actor, r.ip) for r in rows] == [
        ("started", "alice", "198.51.100.4"),
        ("stopped", "alice", "198.51.100.4"),
        ("booked", "alice", "198.51.100.4"),
        ("member added", "system", ""),  # the personal team, made at sign-up
    ]
    assert [(c.field, c.before, c.after) for c in rows[1].changes] == [
        ("state", "running", "stopped")
    ]


def test_an_api_token_is_named_with_its_person_and_address(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day")
    api = _token_api(alice)
    token_id = ApiToken.objects.get().pk
    assert api.post(f"/api/v1/allocations/{allocation.pk}/stop/").status_code == 200
    extended = api.post(
        f"/api/v1/allocations/{allocation.pk}/extend/",
        {"period_count": 2},
        format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )
    assert extended.status_code == 200, extended.content

    stop, extend = AllocationAudit.objects.exclude(pgh_label="booked").order_by("pgh_id")
    for event in (stop, extend):
        assert event.pgh_context["user"] == alice.pk
        assert event.pgh_context["token"] == token_id
        assert event.pgh_context["ip"] == "203.0.113.7"
    row = _rows(_personal(alice), action="extended")[0]
    before = allocation.paid_until
    after = before + timedelta(days=2)
    assert (row.actor, row.token_id, row.action_label) == ("alice", token_id, "extended")
    assert [(c.field, c.before, c.after) for c in row.changes] == [
        ("paid until", f"{before:%Y-%m-%d %H:%M} UTC", f"{after:%Y-%m-%d %H:%M} UTC")
    ]


def test_an_expiry_by_the_enforcement_pass_s_raw_sql_is_the_system_s(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the helper's ALTER TABLE needs it
    end_paid_periods_a_minute_ago()

    assert allocations_enforce_task.apply().get() == {"started": 0, "expired": 1}

    expiry = AllocationAudit.objects.get(pgh_label="state")  # (the helper's move: "moved")
    assert (expiry.pgh_obj_id, expiry.state) == (allocation.pk, AllocationState.EXPIRED)
    assert expiry.pgh_context == {
        "actor": "system", "task": "rentals.tasks.allocations_enforce_task",
    }  # fmt: skip
    row = _rows(_personal(alice), action="expired")[0]
    assert (row.actor, row.action, row.ip) == (
        "system: rentals.tasks.allocations_enforce_task", "expired", "",
    )  # fmt: skip


def test_keys_tokens_members_roles_invitations_and_the_spend_limit_are_recorded(catalog, alice):
    bob = person("bob2", "pw-bob-1234567")
    team = team_with(alice, {bob: Role.VIEWER})
    api = APIClient(REMOTE_ADDR="192.0.2.9")
    api.force_authenticate(alice)
    member = Membership.objects.get(team=team, user=bob)

    key = api.post("/api/v1/ssh-keys/", {"public_key": public_line(ed25519_key())})
    assert key.status_code == 201
    assert api.delete(f"/api/v1/ssh-keys/{key.json()['id']}/").status_code == 204
    api_token_create(user=alice, name="ci", team=team)  # made on a page the API has none of
    token = ApiToken.objects.get(team=team)
    assert api.delete(f"/api/v1/auth/tokens/{token.pk}/").status_code == 204
    url = f"/api/v1/teams/{team.pk}/"
    assert (
        api.patch(f"{url}members/{member.pk}/", {"role": "billing"}, format="json").status_code
        == 200
    )
    assert (
        api.post(f"{url}invitations/", {"email": "c@acme.test", "role": "viewer"}).status_code
        == 201
    )
    assert api.patch(url, {"monthly_spend_limit": "100.00"}, format="json").status_code == 200
    assert api.delete(f"{url}members/{member.pk}/").status_code == 204

    rows = _rows(team)
    assert [r.action for r in rows] == [
        "member removed", "spend limit changed", "invited", "role changed",
        "token revoked", "token created", "key removed", "key added", "member added",
        "member added",
    ]  # fmt: skip
    assert {r.ip for r in rows[:-2]} == {"192.0.2.9"} and {r.actor for r in rows[:-2]} == {"alice"}
    by_action = {r.action: r for r in rows}
    assert [(c.field, c.before, c.after) for c in by_action["role changed"].changes] == [
        ("role", "viewer", "billing")
    ]
    assert [(c.field, c.before, c.after) for c in by_action["spend limit changed"].changes] == [
        ("monthly spend limit", "—", "100.00 USD")
    ]
    assert by_action["member removed"].object == "bob2"
    assert by_action["invited"].object == "c@acme.test"


def test_a_change_of_the_invoice_details_is_recorded_before_and_after(catalog, alice):
    team = team_create(user=alice, name="Acme")
    api = APIClient(REMOTE_ADDR="192.0.2.10")
    api.force_authenticate(alice)
    details = {"legal_name": "Acme GmbH", "address": "Hauptstr. 1", "country": "DE",
               "vat_id": "DE136695976"}  # fmt: skip

    assert api.patch(f"/api/v1/teams/{team.pk}/", details, format="json").status_code == 200

    (row,) = [r for r in _rows(team) if r.action == "invoice details changed"]
    assert (row.actor, row.ip) == ("alice", "192.0.2.10")
    assert ("VAT ID", "—", "DE136695976") in [(c.field, c.before, c.after) for c in row.changes]
    assert ("legal name", "—", "Acme GmbH") in [(c.field, c.before, c.after) for c in row.changes]


def test_staff_actions_are_in_the_full_log_for_staff(catalog, alice, client):
    ops = operator(
        may=(*OPERATIONS, "change_prices", "add_gpuprice", "view_gpuprice", "view_gpumodel")
    )
    allocation = book(alice, model="h100", count=1, period="week")
    staff_api = APIClient(REMOTE_ADDR="10.0.0.5")
    staff_api.force_authenticate(ops)
    now = db_now()
    window = staff_api.post(
        "/api/v1/maintenance/",
        {
            "nodes": [allocation.node.hostname], "reason": "firmware",
            "starts_at": (now + timedelta(days=20)).isoformat(),
            "ends_at": (now + timedelta(days=20, hours=2)).isoformat(),
        },
        format="json",
    )  # fmt: skip
    assert window.status_code == 201, window.content
    flag = Flag.objects.create(
        node=allocation.node, kind=FlagKind.XID, severity=Severity.WARNING, opened_at=now,
        last_seen_at=now,
    )  # fmt: skip
    staff_web = _session(ops, ip="10.0.0.6")
    assert staff_web.post(f"/flags/{flag.pk}/acknowledge/", {"note": "reset"}).status_code == 302
    price = staff_web.post(
        "/admin/catalog/gpuprice/add/",
        {"gpu_model": GpuModel.objects.get(slug="h100").pk,
         "period": RentalPeriod.objects.get(slug="week").pk, "unit_price": "400.00"},
    )  # fmt: skip
    assert price.status_code == 302, price.content[:300]

    rows = _rows(None)
    assert [(r.action, r.actor, r.ip) for r in rows[:3]] == [
        ("price changed", "ops", "10.0.0.6"),
        ("flag acknowledged", "ops", "10.0.0.6"),
        ("maintenance scheduled", "ops", "10.0.0.5"),
    ]
    assert [(c.field, c.before, c.after) for c in rows[0].changes][0] == (
        "unit price", "362.88 USD", "400.00 USD",
    )  # fmt: skip
    week = RentalPeriod.objects.get(slug="week").name
    assert rows[0].object == f"H100 SXM / {week} (USD)"
    # None of them is in the customer's log.
    assert {r.action for r in _rows(_personal(alice))} == {"booked", "member added"}
    # The staff page shows them; a customer is not let in.
    assert "flag acknowledged" in staff_web.get("/audit/").content.decode()
    assert _session(alice).get("/audit/").status_code in (302, 403)


def test_an_event_row_refuses_update_and_early_delete(catalog, alice):
    book(alice, model="l4", count=1, period="day")
    event = AllocationAudit.objects.get()
    with pytest.raises(DatabaseError, match="Cannot update"), transaction.atomic():
        AllocationAudit.objects.filter(pk=event.pk).update(state="stopped")
    with pytest.raises(DatabaseError, match="Cannot delete"), transaction.atomic():
        AllocationAudit.objects.filter(pk=event.pk).delete()
    # A cutoff declared by raw SQL reaches only rows older than itself: not this one.
    with (
        pytest.raises(DatabaseError, match="Cannot delete"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "SELECT set_config('anchorgpu.audit_delete_before', %s, true)",
            [(db_now() - timedelta(days=1)).isoformat()],
        )
        cursor.execute("DELETE FROM audit_allocationaudit")
    assert AllocationAudit.objects.get().state == "running"


def test_retention_deletes_only_the_rows_older_than_the_setting(catalog, alice, settings):
    team = team_create(user=alice, name="Acme")
    with connection.cursor() as cursor:
        for days in (401, 399):
            cursor.execute(
                "INSERT INTO audit_teamaudit (pgh_created_at, pgh_label, pgh_obj_id, name, "
                "require_second_factor) VALUES (now() - make_interval(days => %s), "
                "'spend limit changed', %s, 'old', false)",
                [days, team.pk],
            )
    assert audit_prune() == 1
    assert list(TeamAudit.objects.values_list("name", flat=True)) == ["old"]
    settings.ANCHORGPU = {**settings.ANCHORGPU, "AUDIT_RETENTION_DAYS": 30}
    assert audit_prune() == 1
    assert TeamAudit.objects.count() == 0


def test_a_team_reads_only_its_own_rows_and_only_owner_and_billing_may(catalog, alice, bob):
    acme = team_create(user=alice, name="Acme")
    for role in (Role.MEMBER, Role.BILLING, Role.VIEWER):
        Membership.objects.create(team=acme, user=person(role, "pw-role-1234567"), role=role)
    book(alice, model="l4", count=1, period="day", team=acme)
    bobs = book(bob, model="l4", count=1, period="day")

    seen = APIClient()
    seen.force_authenticate(alice)
    own = seen.get("/api/v1/audit/").json()["results"]  # alice's personal team: nothing booked
    assert [r["action"] for r in own] == ["member added"]
    acme_api = _token_api(alice, acme)
    body = acme_api.get("/api/v1/audit/").json()
    assert [r["action"] for r in body["results"]] == [
        "token created", "booked", "member added", "member added", "member added",
        "member added",
    ]  # fmt: skip
    # Nothing of bob's: neither his name nor his allocation's short id (his numeric pk is no
    # test: its digits turn up in any allocation's or token's short id).
    assert not [
        r for r in body["results"] if "bob" in r["object"] or str(bobs.pk)[:8] in r["object"]
    ]
    billing = Client()
    billing.force_login(Membership.objects.get(team=acme, role=Role.BILLING).user)
    assert billing.get(f"/teams/{acme.pk}/audit/").status_code == 200
    for role in (Role.MEMBER, Role.VIEWER):
        user = Membership.objects.get(team=acme, role=role).user
        assert _token_api(user, acme).get("/api/v1/audit/").status_code == 403
        assert _session(user).get(f"/teams/{acme.pk}/audit/").status_code == 403
    # Bob is not in Acme: its log is not found for him.
    assert _session(bob).get(f"/teams/{acme.pk}/audit/").status_code == 404


def test_bad_filters_are_problem_details_and_words(catalog, alice):
    api = APIClient()
    api.force_authenticate(alice)
    for query, field in (("action=exploded", "action"), ("since=yesterday", "since"),
                         ("since=2026-02-02&until=2026-02-01", "until"), ("cursor=zz", "cursor")):  # fmt: skip
        response = api.get(f"/api/v1/audit/?{query}")
        assert response.status_code == 400, (query, response.content)
        assert response["Content-Type"] == "application/problem+json"
        assert field in response.json()["errors"], query
    page = _session(alice).get(f"/teams/{_personal(alice).pk}/audit/?since=yesterday")
    assert page.status_code == 200 and "Enter a date as YYYY-MM-DD." in page.content.decode()


def test_pages_follow_the_keyset_and_the_filters(catalog, alice):
    for model in ("l4", "h100", "h100"):
        book(alice, model=model, count=1, period="day")
    team = _personal(alice)
    first = audit_page(team_id=team.pk, flt=audit_filter(action="booked"), size=2)
    assert len(first.rows) == 2 and first.next_cursor
    second = audit_page(
        team_id=team.pk, flt=audit_filter(action="booked", cursor=first.next_cursor), size=2
    )
    assert len(second.rows) == 1 and second.next_cursor is None
    assert {r.object_id for r in first.rows}.isdisjoint(r.object_id for r in second.rows)
    today = db_now().date()
    assert _rows(team, until=(today - timedelta(days=1)).isoformat()) == []
    assert len(_rows(team, since=today.isoformat())) == 4  # 3 bookings, joining the team


def test_the_list_endpoint_s_queries_are_pinned(catalog, alice, django_assert_num_queries):
    for model in ("l4", "l4", "h100", "h100", "h100"):
        book(alice, model=model, count=1, period="day")
    api = APIClient()
    api.force_authenticate(alice)
    # session, user, acting (membership, team), the union, users, GPU models, nodes
    with django_assert_num_queries(7, exact=False):
        response = api.get("/api/v1/audit/")
    assert len(response.json()["results"]) == 6


def test_the_team_page_in_english_and_polish(catalog, alice):
    book(alice, model="l4", count=1, period="day")
    team = _personal(alice)
    en = _session(alice).get(f"/teams/{team.pk}/audit/").content.decode()
    assert "Audit log of" in en and "booked" in en and "198.51.100.4" not in en
    pl = _session(alice, language="pl").get(f"/teams/{team.pk}/audit/").content.decode()
    assert "Dziennik zdarzeń" in pl and "zarezerwowano" in pl and "Czynność" in pl


def test_a_price_set_by_a_service_outside_a_request_is_the_system_s(catalog):
    gpu_price_set(
        gpu_model=GpuModel.objects.get(slug="l4"), period=RentalPeriod.objects.get(slug="day"),
        unit_price="9.99", currency="USD",
    )  # fmt: skip
    row = _rows(None, action="price changed")[0]
    assert row.actor == "system" and row.ip == ""


def test_memberships_removed_with_a_user_leave_their_rows(catalog, alice):
    acme = team_create(user=alice, name="Acme")
    carol = person("carol", "pw-carol-123456")
    Membership.objects.create(team=acme, user=carol, role=Role.VIEWER)
    carol_id = carol.pk
    carol.delete()  # cascades to the membership: the log's rows are not in the way
    removed = MembershipAudit.objects.get(pgh_label="member removed")
    assert (removed.user_id, removed.team_id) == (carol_id, acme.pk)


def test_a_new_demo_has_an_audit_log_to_read(settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "DEMO": True}
    call_command("seed_demo", stdout=io.StringIO())
    alice = get_user_model().objects.get(username="alice")
    rows = _rows(_personal(alice))
    assert {"booked", "key added", "member added"} <= {r.action for r in rows}
    assert {r.actor for r in rows} == {"system: seed_demo"}
    assert {r.action for r in _rows(None)} >= {"price changed", "booked"}


def test_a_page_link_with_an_empty_part_is_refused_not_read():
    """A cursor of ours names a time, a table and an id; one with a part left empty (a
    link cut or forged) is refused in words, never compared as None."""
    with pytest.raises(BadAuditFilter) as refused:
        audit_filter(cursor=cursor_write(None, None, None))
    assert refused.value.field == "cursor"
