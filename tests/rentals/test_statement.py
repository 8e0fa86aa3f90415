"""The statement and the allocation lists page through everything, by date range, kind and
state, as pages, CSV and API; staff filter every allocation by owner, model and node."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from accounts.roles import acting_as
from core import csv
from rentals.models import LedgerEntry, LedgerKind
from rentals.services import allocation_cancel, allocation_stop
from rentals.views import allocations as allocation_views
from tests.support.booking import book

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_ledger(catalog, alice):
    """75 rows: the booking's charge today plus a refund-free history of 74 days."""
    allocation = book(alice, model="l4", count=1, period="day")
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            team=allocation.team, user=alice, allocation=allocation, kind=LedgerKind.CHARGE,
            period=allocation.period, amount=Decimal("1.00"), net=Decimal("1.00"), vat=0,
            currency="USD", quote=allocation.quote, reason="booking", period_count=1,
            at=start + timedelta(days=n),
        )
        for n in range(74)
    )  # fmt: skip
    return allocation


def _walk(client, url, *, link="older"):
    """Every page from `url` on, following its `link` (older or newer) to the end."""
    pages = []
    while url:
        response = client.get(url)
        assert response.status_code == 200
        page = response.context["page"]
        pages.append((response, page))
        cursor = getattr(page, link)
        url = (
            f"/statement/?{page.query + '&' if page.query else ''}{link}={cursor}"
            if cursor
            else None
        )
    return pages


def test_the_statement_pages_through_every_row(long_ledger, client, alice):
    client.force_login(alice)
    first = client.get("/statement/")
    assert len(first.context["entries"]) == 50 and "Rows 1–50 of 75" in first.content.decode()
    second = client.get(f"/statement/?older={first.context['page'].older}")
    assert len(second.context["entries"]) == 25 and "Rows 51–75 of 75" in second.content.decode()
    assert second.context["page"].older is None and second.context["page"].newer
    oldest = client.get("/statement/?oldest=1")
    assert [e.pk for e in oldest.context["entries"]] == [
        e.pk for e in LedgerEntry.objects.order_by("-at", "-id")[25:]
    ]
    assert "Rows 26–75 of 75" in oldest.content.decode()


@pytest.fixture
def tied_ledger(catalog, alice):
    """121 rows: the booking's charge, and 120 refunds and charges three to each instant
    (ties on the time), of 1.00 and 2.00."""
    allocation = book(alice, model="l4", count=1, period="day")
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            team=allocation.team, user=alice, allocation=allocation, kind=LedgerKind.CHARGE,
            period=allocation.period, amount=Decimal("1.00") * (1 + n % 2),
            net=Decimal("1.00") * (1 + n % 2), vat=0, currency="USD", quote=allocation.quote,
            reason="booking", period_count=1,
            at=start + timedelta(hours=n // 3),
        )
        for n in range(120)
    )  # fmt: skip
    return allocation


def test_keyset_pages_cover_every_row_once_in_order_through_ties(tied_ledger, client, alice):
    client.force_login(alice)
    everything = [e.pk for e in LedgerEntry.objects.order_by("-at", "-id")]
    pages = _walk(client, "/statement/")
    assert [(p.start, p.end, p.total) for _r, p in pages] == [
        (1, 50, 121),
        (51, 100, 121),
        (101, 121, 121),
    ]
    assert [e.pk for _r, p in pages for e in p.rows] == everything
    assert "Rows 51–100 of 121" in pages[1][0].content.decode()
    # and back again, newer, from the oldest page: the same middle page, then the first
    back = _walk(client, f"/statement/?older={pages[1][1].older}", link="newer")
    assert [[e.pk for e in p.rows] for _r, p in back] == [
        everything[100:],
        everything[50:100],
        everything[:50],
    ]
    # the whole balance on every page, exact
    assert {r.context["balance"] for r, _p in pages} == {
        tied_ledger.quote.total + Decimal("180.00")
    }


def test_keyset_pages_keep_the_filters(tied_ledger, client, alice):
    client.force_login(alice)
    url = "/statement/?since=2026-01-01&until=2026-01-31&kind=charge"
    pages = _walk(client, url)
    assert [(p.start, p.end, p.total) for _r, p in pages] == [
        (1, 50, 120),
        (51, 100, 120),
        (101, 120, 120),
    ]
    assert all("since=2026-01-01" in p.query and "kind=charge" in p.query for _r, p in pages)
    assert {r.context["range_net"] for r, _p in pages} == {Decimal("180.00")}
    assert (
        "older=" in pages[0][0].content.decode() and "kind=charge" in pages[0][0].content.decode()
    )
    refunds = client.get(f"/statement/?kind=refund&older={pages[0][1].older}")
    assert refunds.status_code == 200 and refunds.context["page"].total == 0  # nothing: first page
    assert list(refunds.context["entries"]) == []


@pytest.mark.parametrize(
    "query",
    [
        "older=garbage!",
        "newer=%FF%FE",
        "older=" + "A" * 5000,
        "older=MjAyNi0wMS0wMVQxMjowMDowMHw=",  # "2026-01-01T12:00:00|": no id
        "newer=bm90LWEtZGF0ZXwx",  # "not-a-date|1"
        "older=MjAyNi0wMS0wMVQxMjowMDowMHwx",  # no time zone
        "older=OTk5OTktMDEtMDFUMDA6MDA6MDArMDA6MDB8MQ",  # year 99999
    ],
)
def test_a_bad_page_link_shows_the_first_page_and_says_so(tied_ledger, client, alice, query):
    client.force_login(alice)
    response = client.get(f"/statement/?{query}")
    assert response.status_code == 400
    assert response.context["page"].start == 1 and len(response.context["entries"]) == 50
    assert "This page link is not valid" in response.content.decode()


def test_an_old_page_number_is_the_first_page(tied_ledger, client, alice):
    client.force_login(alice)
    response = client.get("/statement/?page=999999")
    assert response.status_code == 200 and response.context["page"].start == 1


def test_a_date_range_narrows_the_page_its_net_and_the_csv(long_ledger, client, alice):
    client.force_login(alice)
    page = client.get("/statement/?since=2026-01-01&until=2026-01-10")
    assert len(page.context["entries"]) == 10
    assert page.context["range_net"] == Decimal("10.00")
    assert page.context["balance"] == Decimal("90.24")  # 74 × 1.00 + 13.20 + 3.04 VAT, all time
    csv = b"".join(
        client.get("/statement.csv?since=2026-01-01&until=2026-01-10").streaming_content
    ).decode()
    assert len(csv.strip().splitlines()) == 11  # header + 10 rows
    backwards = client.get("/statement/?since=2026-02-01&until=2026-01-01")
    assert backwards.status_code == 400


@pytest.mark.django_db(transaction=True)
def test_the_csv_streams_rows_as_they_are_read_not_after_the_whole_statement(
    long_ledger, client, alice, monkeypatch
):
    """Read outside any transaction, as a server reads a streamed response after its view:
    the cursor is not WITH HOLD (PostgreSQL would compute and store every row of the
    statement before handing over the first), and the rows all come from one snapshot."""
    monkeypatch.setattr(csv, "LINES_PER_CHUNK", 10)
    client.force_login(alice)
    chunks = iter(client.get("/statement.csv").streaming_content)
    first = next(chunks)
    with connection.cursor() as cursor:
        cursor.execute("SELECT is_holdable FROM pg_cursors")
        assert cursor.fetchall() == [(False,)]
        assert connection.in_atomic_block
    body = first + b"".join(chunks)
    assert len(first.splitlines()) == 10 and len(body.splitlines()) == 76  # header + 75 rows
    assert not connection.in_atomic_block


def test_the_api_filters_the_ledger_by_range_and_kind(long_ledger, alice_api):
    body = alice_api.get("/api/v1/ledger/?since=2026-01-05&until=2026-01-06&kind=charge").json()
    assert body["count"] == 2 and body["range_net"] == "2.00" and body["balance"] == "90.24"
    assert alice_api.get("/api/v1/ledger/?kind=refund").json()["count"] == 0
    assert alice_api.get("/api/v1/ledger/?since=2026-13-01").status_code == 400
    csv = alice_api.get("/api/v1/ledger/csv/?since=2026-01-05&until=2026-01-05")
    assert len(b"".join(csv.streaming_content).decode().strip().splitlines()) == 2


def test_staff_filter_every_allocation_by_owner_model_and_node(catalog, alice, bob, staff, client):
    alices = book(alice, model="l4", count=1, period="day")
    bobs = book(bob, model="h100", count=1, period="day")
    client.force_login(staff)
    assert {a.pk for a in client.get("/allocations/").context["allocations"]} == {
        alices.pk,
        bobs.pk,
    }
    assert [a.pk for a in client.get("/allocations/?user=bob").context["allocations"]] == [bobs.pk]
    by_model = client.get("/allocations/?gpu_model=l4").context["allocations"]
    assert [a.pk for a in by_model] == [alices.pk]
    by_node = client.get(f"/allocations/?node={bobs.node.hostname}").context["allocations"]
    assert [a.pk for a in by_node] == [bobs.pk]
    client.force_login(alice)
    assert [a.pk for a in client.get("/allocations/?user=bob").context["allocations"]] == []


def test_balances_are_per_currency_and_never_added_across(catalog, alice, alice_api, client):
    allocation = book(alice, model="l4", count=1, period="day")  # 13.20 USD + 23 % VAT
    LedgerEntry.objects.create(
        team=allocation.team, user=alice, allocation=allocation, kind=LedgerKind.CHARGE,
        period=allocation.period, amount=Decimal("5.00"), net=Decimal("5.00"), vat=0, currency="EUR",
        quote=allocation.quote, reason="booking", period_count=1, at=allocation.paid_from,
    )  # fmt: skip
    body = alice_api.get("/api/v1/ledger/").json()
    assert body["balances"] == [
        {"currency": "EUR", "amount": "5.00"},
        {"currency": "USD", "amount": "16.24"},
    ]
    assert body["balance"] is None  # no single number for two currencies
    client.force_login(alice)
    page = client.get("/statement/").content.decode()
    assert "5.00 EUR" in page and "16.24 USD" in page and "21.24" not in page


def test_the_allocation_list_pages_by_keyset_through_ties_and_filters(
    catalog, alice, client, monkeypatch
):
    """Pages of two: running, stopped, scheduled (three at one start: ties), cancelled; every
    allocation once, in the list's order, with its place in the list, and the state filter
    kept on the links."""
    monkeypatch.setattr(allocation_views, "PAGE_SIZE", 2)
    start = timezone.now() + timedelta(days=3)
    scheduled = [book(alice, model="l4", count=1, period="day", starts_at=start) for _ in range(3)]
    cancelled = book(alice, model="l4", count=1, period="day", starts_at=start)
    allocation_cancel(acting=acting_as(alice), allocation=cancelled)
    running = [book(alice, model="h100", count=1, period="day") for _ in range(2)]
    stopped = book(alice, model="l4", count=1, period="day")
    allocation_stop(acting=acting_as(alice), allocation=stopped)
    client.force_login(alice)

    def walk(url, link="older"):
        pages = []
        while url:
            response = client.get(url)
            assert response.status_code == 200
            page = response.context["page"]
            pages.append(page)
            cursor = getattr(page, link)
            query = page.query + "&" if page.query else ""
            url = f"/allocations/?{query}{link}={cursor}" if cursor else None
        return pages

    pages = walk("/allocations/")
    listed = [a.pk for p in pages for a in p.rows]
    runs = sorted(running, key=lambda a: (-a.paid_from.timestamp(), str(a.pk)))
    assert listed[:3] == [a.pk for a in runs] + [stopped.pk]
    assert set(listed[3:6]) == {a.pk for a in scheduled} and listed[6] == cancelled.pk
    assert [(p.start, p.end, p.total) for p in pages] == [
        (1, 2, 7),
        (3, 4, 7),
        (5, 6, 7),
        (7, 7, 7),
    ]
    back = walk(f"/allocations/?older={pages[2].older}", link="newer")
    assert [a.pk for p in reversed(back) for a in p.rows] == listed
    oldest = client.get("/allocations/?oldest=1").context["page"]
    assert [a.pk for a in oldest.rows] == listed[-2:] and oldest.start == 6
    only = walk("/allocations/?state=scheduled")
    assert [(p.start, p.end, p.total) for p in only] == [(1, 2, 3), (3, 3, 3)]
    assert sorted(str(a.pk) for p in only for a in p.rows) == sorted(str(a.pk) for a in scheduled)
    assert "state=scheduled" in only[0].query
    bad = client.get("/allocations/?older=bm90fGF8Y3Vyc29y")
    assert bad.status_code == 400 and "This page link is not valid" in bad.content.decode()
    assert bad.context["page"].start == 1
