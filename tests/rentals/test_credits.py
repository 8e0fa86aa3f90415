"""Credit notes for impaired time: exactly the impaired GPU-hours × the booking's hourly rate,
in the customer's currency and its minor units, read before it is issued, issued once per
span (even by two staff members at once), shown in the balances and the statement."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from catalog.models import GpuModel, RentalPeriod
from catalog.services import gpu_price_set
from rentals.errors import AlreadyCredited
from rentals.models import ImpairedSpan, LedgerEntry, LedgerKind, Notice, NoticeKind
from rentals.services.credits import credit_note_issue
from tests.support.booking import book
from tests.support.operators import operator
from tests.support.races import in_thread

pytestmark = pytest.mark.django_db


def _ops_api():
    client = APIClient()
    client.force_authenticate(operator())
    return client


def _span(allocation, *, after=timedelta(days=1), hours=5, gpus=1):
    start = allocation.paid_from + after
    return ImpairedSpan.objects.create(
        allocation=allocation, started_at=start, ended_at=start + timedelta(hours=hours),
        gpus=[h.gpu_id for h in allocation.current_holdings][:gpus],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("currency", "week_price", "net", "credited"),
    [
        ("USD", None, "10.80", "13.28"),  # 362.88 / 168 h = 2.16 an hour, × 5 h; + 2.484 VAT
        ("JPY", "54321", "1617", "1989"),  # 54321 × 5 / 168 = 1616.70; + 371.91 VAT
        ("KWD", "111.111", "3.307", "4.068"),  # 111.111 × 5 / 168 = 3.30687…; + 0.76061 VAT
    ],
)
def test_a_five_hour_span_of_a_week_is_credited_exactly_in_the_customers_minor_units(
    catalog, alice, alice_api, client, currency, week_price, net, credited
):
    if week_price:
        gpu_price_set(
            gpu_model=GpuModel.objects.get(slug="h100"),
            period=RentalPeriod.objects.get(slug="week"),
            unit_price=Decimal(week_price), currency=currency,
        )  # fmt: skip
    allocation = book(alice, model="h100", count=2, period="week")
    span = _span(allocation)
    ops = _ops_api()
    url = f"/api/v1/allocations/{allocation.pk}/credit-notes/"

    preview = ops.post(url, {"preview": True}, format="json")
    assert preview.status_code == 200, preview.content
    note = preview.json()
    assert (note["total"], note["currency"], note["issued"]) == (credited, currency, False)
    assert Decimal(note["net"]) + Decimal(note["vat"]) == Decimal(credited)
    assert [(ln["span"], ln["gpus"], ln["gpu_hours"], ln["amount"]) for ln in note["lines"]] == [
        (span.pk, 1, "5.0000", net)
    ]
    assert not LedgerEntry.objects.filter(
        kind=LedgerKind.CREDIT
    ).exists()  # a preview writes nothing

    issued = ops.post(url, {"preview": False}, format="json")
    assert issued.status_code == 201, issued.content
    assert (issued.json()["total"], issued.json()["issued"]) == (credited, True)
    credit = LedgerEntry.objects.get(kind=LedgerKind.CREDIT)
    assert (str(credit.amount.normalize()), credit.currency, credit.impaired_span_id) == (
        str(Decimal(credited).normalize()), currency, span.pk
    )  # fmt: skip
    assert credit.net == Decimal(net) and credit.net + credit.vat == credit.amount
    assert Notice.objects.filter(kind=NoticeKind.CREDITED, impaired_span=span).count() == 1

    charged = LedgerEntry.objects.get(kind=LedgerKind.CHARGE).amount
    ledger = alice_api.get("/api/v1/ledger/").json()
    assert [r["kind"] for r in ledger["results"]] == ["credit", "charge"]
    assert ledger["results"][0]["amount"] == credited
    balance = Decimal(charged) - Decimal(credited)
    assert Decimal(ledger["balances"][0]["amount"]) == balance
    client.force_login(alice)
    statement = client.get("/statement/").content.decode().replace("\xa0", " ")
    assert "Credit: impaired GPUs from" in statement

    again = ops.post(url, {"preview": False}, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "already_credited")
    assert LedgerEntry.objects.filter(kind=LedgerKind.CREDIT).count() == 1


def test_a_credit_for_time_that_was_not_impaired_is_refused_and_changes_nothing(catalog, alice):
    allocation = book(alice, model="h100", count=1, period="week")
    ops = _ops_api()
    url = f"/api/v1/allocations/{allocation.pk}/credit-notes/"
    never = ops.post(url, {"preview": False}, format="json")
    assert never.status_code == 409 and never["Content-Type"] == "application/problem+json"
    assert never.json()["code"] == "not_impaired"
    other = book(alice, model="l4", count=1, period="day")
    span = _span(other)
    foreign = ops.post(url, {"preview": False, "span": span.pk}, format="json")
    assert foreign.status_code == 400 and "span" in str(foreign.json())
    open_span = ImpairedSpan.objects.create(
        allocation=allocation, started_at=allocation.paid_from, gpus=[1]
    )
    still = ops.post(url, {"preview": False}, format="json")
    assert (still.status_code, still.json()["code"]) == (409, "not_impaired")
    assert "still impaired" in still.json()["detail"]
    customer = APIClient()
    customer.force_authenticate(alice)
    open_span.ended_at = open_span.started_at + timedelta(hours=1)
    open_span.save()
    assert customer.post(url, {"preview": False}, format="json").status_code == 403
    no_perm = APIClient()
    no_perm.force_authenticate(operator("viewer-ops", may=("replace_gpus",)))
    assert no_perm.post(url, {"preview": True}, format="json").status_code == 403
    assert not LedgerEntry.objects.filter(kind=LedgerKind.CREDIT).exists()
    assert not Notice.objects.filter(kind=NoticeKind.CREDITED).exists()


def test_a_credit_never_exceeds_what_was_charged_for_the_span(catalog, alice):
    allocation = book(alice, model="h100", count=1, period="week")
    # A span that runs past the paid period is clipped to it: at most the whole charge.
    ImpairedSpan.objects.create(
        allocation=allocation, started_at=allocation.paid_from - timedelta(days=1),
        ended_at=allocation.paid_until + timedelta(days=1),
        gpus=[allocation.current_holdings[0].gpu_id],
    )  # fmt: skip
    note = credit_note_issue(operator=operator(), allocation_id=allocation.pk)
    charge = LedgerEntry.objects.get(kind="charge")
    assert (note.net, note.vat, note.total) == (charge.net, charge.vat, charge.amount)
    assert note.net == Decimal("362.88")


@pytest.mark.django_db(transaction=True)
def test_two_staff_members_issuing_at_once_give_one_credit(catalog, alice):
    allocation = book(alice, model="h100", count=2, period="week")
    _span(allocation, gpus=2)
    staff = [operator("ops-a"), operator("ops-b")]
    barrier = threading.Barrier(2)

    @in_thread
    def issue(i):
        barrier.wait()
        try:
            return str(credit_note_issue(operator=staff[i], allocation_id=allocation.pk).total)
        except AlreadyCredited:
            return "already"

    with ThreadPoolExecutor(2) as pool:
        results = sorted(pool.map(issue, range(2)))
    assert results == ["26.57", "already"]  # 21.60 + 23 % VAT
    assert LedgerEntry.objects.filter(kind=LedgerKind.CREDIT).count() == 1
    assert Notice.objects.filter(kind=NoticeKind.CREDITED).count() == 1


def test_the_owner_reads_the_credit_note_on_the_allocation_page_before_and_after(
    catalog, alice, client
):
    allocation = book(alice, model="h100", count=2, period="week")
    _span(allocation)
    client.force_login(alice)
    page = client.get(f"/allocations/{allocation.pk}/").content.decode().replace("\xa0", " ")
    assert 'id="impaired-time"' in page and "To be credited: <strong>13.28 USD</strong>" in page
    credit_note_issue(operator=operator(), allocation_id=allocation.pk)
    page = client.get(f"/allocations/{allocation.pk}/").content.decode().replace("\xa0", " ")
    assert "credited 13.28 USD" in page and 'id="credit-pending"' not in page
