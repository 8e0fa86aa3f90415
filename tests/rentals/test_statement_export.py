"""A statement longer than STATEMENT_EXPORT_ROWS is exported in the background: a worker
writes the file into the database, a notice links to it, the team's owners and billing
members download it for 7 days; below the threshold the CSV streams as before."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone, translation
from rest_framework.test import APIClient

from accounts.models import Role
from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from core.db import db_now
from rentals.errors import TooManyExports
from rentals.models import (
    ExportState,
    LedgerEntry,
    LedgerKind,
    Notice,
    NoticeKind,
    StatementExport,
    StatementExportPart,
)
from rentals.selectors import exports as export_reads
from rentals.services import allocation_cancel, exports
from rentals.tasks import (
    statement_export_run_task,
    statement_exports_prune_task,
)
from rentals.texts import notice_subject, notice_text
from tests.support.booking import book
from tests.support.factories.accounts import person, team_with
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db

ROWS = 3000


@pytest.fixture
def threshold(settings):
    """A small threshold: a statement of more than 100 rows is exported."""
    settings.ANCHORGPU = {**settings.ANCHORGPU, "STATEMENT_EXPORT_ROWS": 100}


@pytest.fixture
def acme(catalog, alice):
    """Acme: alice owns it, with a member, a billing member and a viewer, and a statement of
    ROWS + 3 rows: a history of ROWS charges a minute apart from 2026-01-01 12:00, a booking
    today, and a scheduled booking cancelled (its charge and its refund)."""
    members = {person(role, f"pw-{role}-1234567"): role for role in ("member", "billing", "viewer")}
    team = team_with(alice, members)
    allocation = book(alice, model="l4", count=1, period="day", team=team)
    later = book(alice, model="l4", count=1, period="day", team=team,
                 starts_at=timezone.now() + timedelta(days=2))  # fmt: skip
    allocation_cancel(acting=acting_as(alice, team), allocation=later)
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            team=team, user=alice, allocation=allocation, kind=LedgerKind.CHARGE,
            period=allocation.period, amount=Decimal("1.23"), net=Decimal("1.00"),
            vat=Decimal("0.23"), currency="USD", quote=allocation.quote, reason="booking",
            period_count=1 + n % 3, at=start + timedelta(minutes=n),
        )
        for n in range(ROWS)
    )  # fmt: skip
    return team


def _as(user, team, *, language=None) -> Client:
    client = Client()
    client.force_login(user)
    session = client.session
    session["team_id"] = team.pk
    if language:
        session["preferred_language"] = language
    session.save()
    return client


def _member(team, role):
    return team.memberships.get(role=role).user


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


def _export(client, team, **filters) -> StatementExport:
    """Ask for an export from the statement page, as the page's form posts it."""
    before = set(StatementExport.objects.values_list("pk", flat=True))
    response = client.post("/statement/exports/", {"acting_team": team.pk, **filters})
    assert response.status_code == 302, response.content
    return StatementExport.objects.exclude(pk__in=before).get()


def test_below_the_threshold_the_page_links_the_streamed_csv(acme, alice):
    client = _as(alice, acme)
    page = client.get("/statement/").content.decode()
    assert 'href="/statement.csv"' in page and "Prepare a CSV export" not in page
    csv = _body(client.get("/statement.csv")).decode()
    assert len(csv.splitlines()) == 1 + ROWS + 3
    assert StatementExport.objects.count() == 0


def test_above_it_the_page_queues_an_export_whose_file_is_the_streamed_csv(
    acme, alice, threshold, monkeypatch
):
    # Parts as small as zlib hands out (its header, then the rest at the end) and the CSV
    # unzipped a kB at a time: the seams of both are tried.
    monkeypatch.setattr(exports, "PART_BYTES", 8)
    monkeypatch.setattr(export_reads, "OUT_BYTES", 1000)
    client = _as(alice, acme)
    page = client.get("/statement/?since=2026-01-01&until=2026-01-02&kind=charge")
    assert "Prepare a CSV export" in page.content.decode()
    assert 'href="/statement.csv' not in page.content.decode()

    export = _export(client, acme, since="2026-01-01", until="2026-01-02", kind="charge")
    assert (export.state, export.team, export.requested_by) == ("queued", acme, alice)
    assert (str(export.since), str(export.until), export.kind) == (
        "2026-01-01", "2026-01-02", "charge",
    )  # fmt: skip
    assert statement_export_run_task(str(export.pk)) == "ready"

    export.refresh_from_db()
    streamed = _body(client.get("/statement.csv?since=2026-01-01&until=2026-01-02&kind=charge"))
    downloaded = client.get(f"/statement/exports/{export.pk}/")
    assert downloaded.status_code == 200
    assert downloaded["Content-Type"] == "text/csv; charset=utf-8"
    assert _body(downloaded) == streamed
    charges = 2 * 24 * 60 - 12 * 60  # 2026-01-01 12:00 to the end of the 2nd
    assert (export.state, export.rows, export.size) == ("ready", charges, len(streamed))
    assert export.parts == StatementExportPart.objects.filter(export=export).count() > 1
    assert export.stored < export.size / 4  # gzip
    assert export.expires_at - export.finished_at == timedelta(days=7)
    # the page lists it, ready, with its link
    listed = client.get("/statement/").content.decode()
    assert f'href="/statement/exports/{export.pk}/"' in listed and "ready" in listed
    # a second run finds nothing to do: the file is written once
    assert statement_export_run_task(str(export.pk)) == "skipped"


def test_the_export_is_in_the_language_it_was_asked_in(acme, alice, threshold):
    client = _as(alice, acme, language="pl")
    export = _export(client, acme)
    assert export.language == "pl"
    exports.statement_export_run(export_id=export.pk)
    streamed = _body(client.get("/statement.csv"))
    polish = _body(client.get(f"/statement/exports/{export.pk}/"))
    assert polish == streamed and "Rezerwacja: 1 × " in polish.decode()


def _acting(user, team):
    return acting_as(user, team)


def test_only_the_owner_and_billing_may_prepare_or_download_it(acme, alice, bob, threshold):
    export = exports.statement_export_request(acting=_acting(alice, acme), language="en")
    exports.statement_export_run(export_id=export.pk)
    url = f"/statement/exports/{export.pk}/"

    assert _as(alice, acme).get(url).status_code == 200
    assert _as(_member(acme, Role.BILLING), acme).get(url).status_code == 200
    for role in (Role.MEMBER, Role.VIEWER):
        refused = _as(_member(acme, role), acme).get(url)
        assert refused.status_code == 403 and "cannot do this" in refused.content.decode()
    other = Client()
    other.force_login(bob)
    assert other.get(url).status_code == 404
    assert other.get("/statement/exports/00000000-0000-0000-0000-000000000000/").status_code == 404

    api = APIClient()
    api.force_authenticate(_member(acme, Role.BILLING))
    assert _body(api.get(f"/api/v1/ledger/exports/{export.pk}/csv/")).startswith(b"date_utc,")
    api.force_authenticate(bob)
    gone = api.get(f"/api/v1/ledger/exports/{export.pk}/csv/")
    assert gone.status_code == 404 and gone["Content-Type"] == "application/problem+json"

    # a member sees the statement, but is offered no export and may not ask for one
    member = _as(_member(acme, Role.MEMBER), acme)
    page = member.get("/statement/").content.decode()
    assert "Prepare a CSV export" not in page and "billing members can prepare it" in page
    refused = member.post("/statement/exports/", {"acting_team": acme.pk})
    assert refused.status_code == 403
    assert StatementExport.objects.count() == 1


def test_the_api_prepares_lists_and_serves_an_export(acme, alice, threshold):
    api = APIClient()  # a token of Acme's: a session would act for the personal team
    api.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=alice, name='t', team=acme)}"
    )
    created = api.post("/api/v1/ledger/exports/", {"kind": "refund"}, format="json")
    assert created.status_code == 202 and created.json()["state"] == "queued"
    assert created.json()["csv"] is None
    pk = created.json()["id"]
    again = api.post("/api/v1/ledger/exports/", {"kind": "refund"}, format="json")
    assert again.json()["id"] == pk  # the same request while in flight is the same export
    early = api.get(f"/api/v1/ledger/exports/{pk}/csv/")
    assert early.status_code == 409 and early.json()["code"] == "export_not_ready"

    exports.statement_export_run(export_id=pk)
    body = api.get(f"/api/v1/ledger/exports/{pk}/").json()
    refunds = 1
    assert (body["state"], body["rows"], body["kind"]) == ("ready", refunds, "refund")
    assert body["csv"] == f"/api/v1/ledger/exports/{pk}/csv/"
    csv = _body(api.get(body["csv"])).decode().splitlines()
    assert len(csv) == 1 + refunds and all(",refund," in line for line in csv[1:])
    assert [e["id"] for e in api.get("/api/v1/ledger/exports/").json()] == [pk]


@pytest.mark.parametrize(
    "data, field",
    [
        ({"since": "2026-02-01", "until": "2026-01-01"}, "until"),
        ({"kind": "bribe"}, "kind"),
        ({"since": "not-a-date"}, "since"),
    ],
)
def test_bad_input_is_a_clear_error_and_queues_nothing(acme, alice, threshold, data, field):
    page = _as(alice, acme).post("/statement/exports/", {"acting_team": acme.pk, **data})
    assert page.status_code == 400 and b"Invalid input" in page.content
    api = APIClient()
    api.force_authenticate(alice)
    problem = api.post("/api/v1/ledger/exports/", data, format="json")
    assert problem.status_code == 400 and field in problem.json()["errors"]
    assert StatementExport.objects.count() == 0


def test_a_team_has_a_few_exports_in_flight_at_most(acme, alice):
    acting = _acting(alice, acme)
    for day in (1, 2, 3):
        exports.statement_export_request(
            acting=acting, filters={"since": date(2026, 1, day)}, language="en"
        )
    with pytest.raises(TooManyExports):
        exports.statement_export_request(acting=acting, filters={}, language="en")
    assert StatementExport.objects.count() == 3


def test_expired_is_gone_in_words_and_the_retention_task_drops_its_file(acme, alice):
    acting = _acting(alice, acme)
    old, fresh = (exports.statement_export_request(acting=acting, filters=f, language="en")
                  for f in ({}, {"kind": "refund"}))  # fmt: skip
    for export in (old, fresh):
        exports.statement_export_run(export_id=export.pk)
    StatementExport.objects.filter(pk=old.pk).update(expires_at=db_now() - timedelta(seconds=1))
    client = _as(alice, acme)

    gone = client.get(f"/statement/exports/{old.pk}/")
    assert gone.status_code == 410 and "expired" in gone.content.decode()
    assert statement_exports_prune_task() == 1
    old.refresh_from_db()
    assert (old.state, old.parts) == (ExportState.EXPIRED, 0)
    assert not StatementExportPart.objects.filter(export=old).exists()
    assert client.get(f"/statement/exports/{old.pk}/").status_code == 410
    assert StatementExportPart.objects.filter(export=fresh).exists()  # not yet due
    assert client.get(f"/statement/exports/{fresh.pk}/").status_code == 200
    assert statement_exports_prune_task() == 0


def test_the_notice_links_to_the_export_in_both_languages(acme, alice):
    export = exports.statement_export_request(acting=_acting(alice, acme), language="en")
    exports.statement_export_run(export_id=export.pk)
    notice = Notice.objects.get(kind=NoticeKind.EXPORT_READY)
    assert (notice.user, notice.statement_export_id, notice.allocation_id) == (
        alice, export.pk, None,
    )  # fmt: skip
    client = _as(alice, acme)
    page = client.get("/notices/").content.decode()
    assert f'href="/statement/exports/{export.pk}/"' in page
    assert "statement export is ready" in page and f"{ROWS + 3} rows" in page
    with translation.override("pl"):
        polish = notice_subject(notice) + notice_text(notice)
    assert "CSV" in polish and "statement" not in polish


def test_a_writer_that_died_is_resumed_and_a_lost_member_fails_it(acme, alice):
    acting = _acting(alice, acme)
    export = exports.statement_export_request(acting=acting, language="en")
    now = db_now()
    StatementExport.objects.filter(pk=export.pk).update(
        state=ExportState.RUNNING, claimed_until=now - timedelta(seconds=1), attempts=1,
        created_at=now - timedelta(minutes=5),
    )  # fmt: skip
    assert exports.statement_exports_resume(now=now) == [str(export.pk)]
    assert exports.statement_export_run(export_id=export.pk) == "ready"
    assert exports.statement_exports_resume(now=now) == []

    billing = _member(acme, Role.BILLING)
    left = exports.statement_export_request(
        acting=_acting(billing, acme), filters={"kind": "refund"}, language="en"
    )
    acme.memberships.filter(user=billing).delete()
    assert exports.statement_export_run(export_id=left.pk) == "failed"
    left.refresh_from_db()
    assert left.state == ExportState.FAILED and "not a member" in left.last_error
    assert not StatementExportPart.objects.filter(export=left).exists()
    assert not Notice.objects.filter(statement_export=left).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_real_worker_writes_the_export(acme, alice, threshold, worker):
    export = _export(_as(alice, acme), acme)  # queued after the request's commit
    assert wait_for(lambda: StatementExport.objects.get(pk=export.pk).state == "ready")
    assert Notice.objects.filter(statement_export=export).exists()
