"""Invoices numbered after commit, off the booking's path (invoices.sql.NUMBER): gapless and in
the order of the issuing transactions under concurrent bookings with some rolled back, never
skipping an earlier transaction still open, shown honestly until numbered, and numbered by a
real worker within seconds of the commit."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import IntegrityError, connections, transaction

from accounts.roles import acting_as
from invoices.models import Invoice, InvoiceCounter, InvoiceKind
from invoices.services import invoices_number
from rentals.models import LedgerEntry, LedgerKind
from rentals.services import allocation_book, quote_create
from rentals.signals import ledger_entries_recorded
from tests.support.factories.accounts import UserFactory
from tests.support.transactions import held_open
from tests.support.waiting import wait_for


class Refused(Exception):
    pass


@pytest.fixture(autouse=True)
def _rates(pln_rates):
    """USD charges with Polish VAT are invoiced with the rate of a day before the sale."""


def _quote(user):
    return quote_create(
        acting=acting_as(user), gpu_model="h100", gpu_count=1, period="day", period_count=1
    )


def _invoices():
    return list(Invoice.objects.filter(kind=InvoiceKind.INVOICE).order_by("xact", "id"))


@pytest.mark.django_db(transaction=True)
def test_numbers_are_gapless_and_in_transaction_order_under_24_bookings_a_quarter_rolled_back(
    catalog,
):
    users = UserFactory.create_batch(24)
    quotes = [_quote(u) for u in users]
    doomed = {u.pk for u in users[::4]}  # 6 roll back after their invoice was written

    def refuse_some(sender, entry_ids, **kwargs):
        if LedgerEntry.objects.filter(pk__in=entry_ids, user_id__in=doomed).exists():
            raise Refused

    ledger_entries_recorded.connect(refuse_some)  # after the invoices' receiver
    barrier = threading.Barrier(len(users))

    def attempt(i):
        try:
            barrier.wait()
            allocation_book(acting=acting_as(users[i]), quote=quotes[i])
            return "ok"
        except Refused:
            return "refused"
        except Exception as exc:  # no capacity is fine too; anything else is reported
            return type(exc).__name__
        finally:
            connections.close_all()

    try:
        with ThreadPoolExecutor(len(users)) as pool:
            results = list(pool.map(attempt, range(len(users))))
    finally:
        ledger_entries_recorded.disconnect(refuse_some)

    booked = results.count("ok")
    assert results.count("refused") == len(doomed)
    assert booked == 18, results
    # Written by the bookings, numbered by nobody yet: the bookings took no counter row.
    assert [i.number for i in _invoices()] == [None] * booked
    assert not InvoiceCounter.objects.exists()

    assert len(invoices_number()) == booked
    invoices = _invoices()
    # In the order of their transactions, from 1, with no gap and no duplicate.
    assert [i.number for i in invoices] == list(range(1, booked + 1))
    assert [i.display_number for i in invoices][:2] == [
        f"AG/{invoices[0].year}/000001", f"AG/{invoices[0].year}/000002"
    ]  # fmt: skip
    assert len({i.xact for i in invoices}) == booked
    assert InvoiceCounter.objects.get(series="AG").last == booked
    assert len(invoices) == LedgerEntry.objects.filter(kind=LedgerKind.CHARGE).count()
    assert invoices_number() == []  # nothing left, nothing numbered twice


@pytest.mark.django_db(transaction=True)
def test_an_earlier_transaction_still_open_is_never_skipped(catalog, alice, bob):
    alice_quote, bob_quote = _quote(alice), _quote(bob)
    with held_open(lambda: allocation_book(acting=acting_as(alice), quote=alice_quote)):
        allocation_book(acting=acting_as(bob), quote=bob_quote)  # began later, committed first
        assert invoices_number() == []  # alice's booking may still commit before it
        (bobs,) = _invoices()
        assert bobs.number is None
    # Alice's booking committed: hers is numbered first, then bob's.
    assert len(invoices_number()) == 2
    assert [(i.team_id, i.number) for i in _invoices()] == [
        (acting_as(alice).team.pk, 1), (acting_as(bob).team.pk, 2)
    ]  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_earlier_transaction_takes_no_number(catalog, alice, bob):
    alice_quote, bob_quote = _quote(alice), _quote(bob)

    def book_then_roll_back():
        with transaction.atomic():
            allocation_book(acting=acting_as(alice), quote=alice_quote)
            transaction.set_rollback(True)

    with held_open(book_then_roll_back):
        allocation_book(acting=acting_as(bob), quote=bob_quote)
    assert len(invoices_number()) == 1
    assert [(i.team_id, i.number) for i in _invoices()] == [(acting_as(bob).team.pk, 1)]


@pytest.mark.django_db
def test_an_unnumbered_invoice_is_shown_as_being_numbered(catalog, alice, alice_api, client):
    allocation_book(acting=acting_as(alice), quote=_quote(alice))
    (invoice,) = _invoices()
    client.force_login(alice)

    (listed,) = alice_api.get("/api/v1/invoices/").json()["results"]
    assert (listed["state"], listed["number"], listed["display_number"]) == (
        "being_numbered", None, None
    )  # fmt: skip
    refused = alice_api.get(f"/api/v1/invoices/{invoice.pk}/pdf/")
    assert refused.status_code == 409
    assert refused.json()["code"] == "invoice_being_numbered"
    page = client.get("/invoices/").content.decode()
    assert "being numbered" in page and f"/invoices/{invoice.pk}/pdf/" not in page

    invoices_number()  # this test's own transaction: nothing earlier is open
    invoice.refresh_from_db()
    (listed,) = alice_api.get("/api/v1/invoices/").json()["results"]
    assert (listed["state"], listed["number"], listed["display_number"]) == (
        "issued", 1, invoice.display_number
    )  # fmt: skip
    assert alice_api.get(f"/api/v1/invoices/{invoice.pk}/pdf/").status_code == 200
    page = client.get("/invoices/").content.decode()
    assert invoice.display_number in page and "being numbered" not in page


@pytest.mark.django_db
def test_a_number_is_given_once_and_nothing_else_changes(catalog, alice):
    allocation_book(acting=acting_as(alice), quote=_quote(alice))
    (invoice,) = _invoices()
    with pytest.raises(IntegrityError), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(gross=invoice.gross + 1)
    invoices_number()
    with pytest.raises(IntegrityError), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(number=7, display_number="AG/2026/000007")
    invoice.refresh_from_db()
    assert invoice.number == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_numbers_invoices_within_seconds_of_the_commit(catalog, alice, worker):
    allocation_book(acting=acting_as(alice), quote=_quote(alice))  # cues the worker on commit
    assert wait_for(lambda: Invoice.objects.filter(number=1).exists(), timeout=15)
