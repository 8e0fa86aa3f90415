"""Money in each currency's own minor units, and words rendered for the reader: quote lines,
ledger rows and receipts keep facts and speak the reader's language wherever they are read."""

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.utils import timezone, translation

from accounts.roles import acting_as
from accounts.services.profile import account_preferences_set
from catalog.models import GpuModel, RentalPeriod
from catalog.services import gpu_price_set
from core.dates import when_text
from core.db import db_now
from core.errors import Invalid
from core.money import Money, amount_check, minor_units, money_text
from core.templatetags.when import when
from rentals.models import LedgerEntry, Notice
from rentals.services import (
    allocation_book,
    allocation_cancel,
    notice_send,
    notices_unsent,
    quote_create,
)
from tests.support.booking import book, key

pytestmark = pytest.mark.django_db


def _price(model, period, amount, currency):
    gpu_price_set(
        gpu_model=GpuModel.objects.get(slug=model),
        period=RentalPeriod.objects.get(slug=period),
        unit_price=Decimal(amount),
        currency=currency,
    )


def _csv(response):
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_each_currency_keeps_its_own_minor_units():
    assert (minor_units("JPY"), minor_units("USD"), minor_units("KWD")) == (0, 2, 3)
    assert Money(Decimal("1499.5"), "JPY").amount == Decimal("1500")  # half-even
    assert str(Money(Decimal("1.2345"), "KWD").amount) == "1.234"
    assert money_text(Decimal("1296"), "JPY", "en") == "1,296 JPY"
    assert " ".join(money_text(Decimal("12.5"), "KWD", "pl").split()) == "12,500 KWD"
    assert " ".join(money_text(Decimal("1296.5"), "USD", "pl").split()) == "1 296,50 USD"
    with pytest.raises(ValueError, match="cannot combine"):
        Money(Decimal(1), "JPY") + Money(Decimal(1), "USD")
    with pytest.raises(ValidationError, match="0 decimal places"):
        amount_check(Decimal("12.5"), "JPY")
    with pytest.raises(ValueError, match="unknown currency"):
        minor_units("XYZ")


def test_a_price_finer_than_its_currency_is_refused_and_nothing_changes(catalog):
    l4 = GpuModel.objects.get(slug="l4")
    before = l4.prices.count()
    with pytest.raises(Invalid) as refused:
        _price("l4", "day", "1500.5", "JPY")
    assert "unit_price" in refused.value.errors
    with pytest.raises(Invalid) as refused:
        _price("l4", "day", "10", "XYZ")
    assert "currency" in refused.value.errors
    assert l4.prices.count() == before


@pytest.mark.parametrize(
    ("currency", "unit", "net", "total", "shown"),
    [
        ("JPY", "1500", "3000", "3690", "3,690 JPY"),  # VAT 690
        ("KWD", "4.125", "8.250", "10.148", "10.148 KWD"),  # VAT 1.8975 → 1.898
    ],
)
def test_jpy_and_kwd_in_the_quote_the_ledger_and_the_csv(
    catalog, alice, alice_api, client, currency, unit, net, total, shown
):
    _price("l4", "day", unit, currency)
    quote = alice_api.post(
        "/api/v1/quotes/",
        {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 2},
        format="json",
    ).json()
    assert (quote["currency"], quote["total"]) == (currency, total)
    assert quote["lines"][0]["unit_price"] == unit and quote["lines"][0]["amount"] == net
    assert quote["net_total"] == net
    booked = alice_api.post(
        "/api/v1/bookings/", {"quote": quote["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=key()
    )
    assert booked.status_code == 201, booked.json()
    assert booked.json()["amount"] == total

    ledger = alice_api.get("/api/v1/ledger/").json()
    assert ledger["results"][0]["amount"] == total
    assert ledger["balances"] == [{"currency": currency, "amount": total}]
    rows = _csv(alice_api.get("/api/v1/ledger/csv/"))
    assert rows[1][3:5] == [total, currency]

    client.force_login(alice)
    assert shown in client.get(f"/quotes/{quote['id']}/").content.decode().replace("\xa0", " ")
    statement = client.get("/statement/").content.decode().replace("\xa0", " ")
    assert shown in statement
    page_csv = _csv(client.get("/statement.csv"))
    assert page_csv[1][3:5] == [total, currency]


def test_a_polish_reader_reads_polish_lines_for_a_quote_an_english_script_made(
    catalog, alice, client
):
    account_preferences_set(user=alice, language="pl")
    with translation.override("en"):  # an admin's script, in English
        acting = acting_as(alice)
        quote = quote_create(
            acting=acting, gpu_model="h100", gpu_count=2, period="week", period_count=3,
            options=[{"option": "nvme-scratch", "quantity": 2}],
        )  # fmt: skip
        allocation_book(acting=acting, quote=quote)
        assert quote.lines.count() == 2

    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "pl", "next": "/"})
    page = client.get(f"/quotes/{quote.pk}/").content.decode()
    assert "2 × H100 SXM na 3 tygodnie" in page
    assert "Przestrzeń NVMe: 2 TB na 3 tygodnie" in page  # the option's own Polish name

    statement = _csv(client.get("/statement.csv"))
    assert statement[1][2] == "Rezerwacja: 2 × H100 SXM na 3 tygodnie"

    for pk in notices_unsent(now=db_now() + timedelta(minutes=5), older_than=timedelta(0)):
        notice_send(notice_id=pk)
    (receipt,) = mail.outbox
    assert receipt.subject.startswith("AnchorGPU: rezerwacja potwierdzona")
    assert "2 × H100 SXM na 3 tygodnie: " in receipt.body
    assert "Przestrzeń NVMe: 2 TB na 3 tygodnie: " in receipt.body
    assert "Pobrano (brutto): " in receipt.body and "VAT 23 %: " in receipt.body
    assert Notice.objects.get().kind == "booked"


def test_the_api_speaks_the_language_asked_for(catalog, alice, alice_api):
    book(alice, model="l4", count=1, period="day", periods=2)
    english = alice_api.get("/api/v1/ledger/").json()["results"][0]
    assert english["description"] == "Booking: 1 × L4 for 2 days"
    assert (english["reason"], english["period_count"]) == ("booking", 2)
    polish = alice_api.get("/api/v1/ledger/", HTTP_ACCEPT_LANGUAGE="pl").json()["results"][0]
    assert polish["description"] == "Rezerwacja: 1 × L4 na 2 dni"
    by_param = alice_api.get("/api/v1/ledger/?lang=pl").json()["results"][0]
    assert by_param["description"] == polish["description"]
    assert LedgerEntry.objects.get().reason == "booking"


def test_times_show_in_the_readers_time_zone_with_utc_on_hover(catalog, alice, client):
    client.force_login(alice)
    client.post(
        "/account/profile/", {"language": "en", "time_zone": "Asia/Tokyo", "first_name": ""}
    )
    allocation = book(alice, model="l4", count=1, period="day")
    page = client.get(f"/allocations/{allocation.pk}/").content.decode()
    utc = allocation.paid_until.strftime("%Y-%m-%d %H:%M UTC")
    assert f'title="{utc}"' in page
    assert " JST</time>" in page


def test_a_time_or_an_amount_formatted_once_still_follows_each_readers_zone_and_language():
    """The formats are kept per process (core.dates, core.money): the same instant and the
    same amount, read in turn by readers of other zones and languages, read as theirs."""
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    seen = []
    for zone, language in [("UTC", "en"), ("Asia/Tokyo", "en"), ("Europe/Warsaw", "pl"),
                           ("UTC", "en"), ("Europe/Warsaw", "en")]:  # fmt: skip
        with timezone.override(zone), translation.override(language):
            seen.append((when_text(at), when(at), money_text(Decimal("1296.5"), "USD")))
    assert [text for text, _, _ in seen] == [
        "Nov. 30, 2026, 10 a.m. UTC",
        "Nov. 30, 2026, 7 p.m. JST",
        "30 listopada 2026 11:00 CET",
        "Nov. 30, 2026, 10 a.m. UTC",
        "Nov. 30, 2026, 11 a.m. CET",
    ]
    assert seen[0] == seen[3]
    assert all('title="2026-11-30 10:00 UTC"' in html for _, html, _ in seen)
    assert [html.count(text) for text, html, _ in seen] == [1] * 5
    assert [" ".join(amount.split()) for _, _, amount in seen] == [
        "1,296.50 USD", "1,296.50 USD", "1 296,50 USD", "1,296.50 USD", "1,296.50 USD"
    ]  # fmt: skip
    # An amount written with more places reads as the same money; a float is its binary
    # value, as babel reads it (2.675 is a hair under), its text half-even rounded.
    assert money_text(Decimal("1296.5000"), "USD", "en") == money_text(1296.5, "USD", "en")
    assert (money_text("2.675", "USD", "en"), money_text(2.675, "USD", "en")) == (
        "2.68 USD", "2.67 USD"
    )  # fmt: skip


def test_a_cancellation_gets_a_refund_receipt_in_the_owners_language(catalog, alice, bob):
    account_preferences_set(user=alice, language="pl")
    later = db_now() + timedelta(days=3)
    booked = book(alice, model="l4", count=2, period="day", periods=2, starts_at=later)
    allocation_cancel(acting=acting_as(alice), allocation=booked)
    cluster = quote_create(
        acting=acting_as(bob), gpu_model="h100", node_count=2, period="day", period_count=1,
        starts_at=later,
    )  # fmt: skip
    first = allocation_book(acting=acting_as(bob), quote=cluster)
    allocation_cancel(acting=acting_as(bob), allocation=first)

    for pk in notices_unsent(now=db_now() + timedelta(minutes=5), older_than=timedelta(0)):
        notice_send(notice_id=pk)
    refunds = {m.to[0]: m for m in mail.outbox if "refund" in m.subject or "zwr" in m.subject}
    polish, english = refunds[alice.email], refunds[bob.email]
    assert polish.subject == "AnchorGPU: rezerwacja anulowana i zwrócona: 2 × L4"
    paid = money_text(booked.quote.total, "USD", "pl")
    assert f"Zwrócono: {paid}" in polish.body and "przed jej rozpoczęciem" in polish.body
    assert english.subject == "AnchorGPU booking cancelled and refunded: 16 × H100 SXM"
    assert f"Refunded: {money_text(cluster.total, 'USD', 'en')}" in english.body
    assert Notice.objects.filter(kind="refunded").count() == 2
