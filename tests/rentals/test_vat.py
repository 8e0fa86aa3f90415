"""VAT on quotes: each buyer's treatment, one rounding per quote, and every
charge, refund and credit carrying the net and VAT of the quote the customer read."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounts.errors import NotAllowed
from accounts.models import Team
from accounts.roles import acting_as, personal_team
from accounts.services.teams import team_buyer_set
from catalog.services import gpu_price_set
from core.db import db_now
from core.errors import Invalid
from core.vat import TaxTreatment, vat_split
from rentals.models import LedgerEntry, LedgerKind
from rentals.services import (
    allocation_cancel,
    allocation_extend,
    extension_quote_create,
    quote_create,
)
from tests.support.booking import book

pytestmark = pytest.mark.django_db

# Real check digits: a Polish NIP, a German and an Austrian VAT number.
PL_NIP = "5260250274"
DE_VAT = "DE136695976"
AT_VAT = "ATU13585627"


def _company(user, **details) -> Team:
    return team_buyer_set(acting=acting_as(user), **details)


def _quote(user, **kwargs):
    request = {"gpu_model": "h100", "gpu_count": 1, "period": "week", "period_count": 1}
    return quote_create(acting=acting_as(user), **{**request, **kwargs})


@pytest.mark.parametrize(
    "details, treatment, rate",
    [
        ({}, TaxTreatment.CONSUMER, Decimal("0.23")),
        ({"country": "PL", "vat_id": PL_NIP}, TaxTreatment.DOMESTIC, Decimal("0.23")),
        ({"country": "DE", "vat_id": DE_VAT}, TaxTreatment.REVERSE_CHARGE, Decimal(0)),
        ({"country": "AT", "vat_id": ""}, TaxTreatment.CONSUMER, Decimal("0.23")),
        ({"country": "US", "vat_id": "12-3456789"}, TaxTreatment.OUTSIDE_EU, Decimal(0)),
    ],
    ids=["consumer", "domestic", "eu-reverse-charge", "eu-without-vat-id", "outside-eu"],
)
def test_each_buyer_gets_its_treatment_and_the_charge_is_the_gross(
    catalog, alice, details, treatment, rate
):
    if details:
        _company(alice, legal_name="Acme GmbH", address="Hauptstr. 1\n10115 Berlin", **details)

    quote = _quote(alice)

    assert (quote.tax_treatment, quote.vat_rate) == (treatment, rate)
    assert quote.net_total == Decimal("362.88")
    assert quote.vat_total == (Decimal("83.46") if rate else 0)  # 362.88 × 0.23 = 83.4624
    assert quote.total == quote.net_total + quote.vat_total
    allocation = book(alice)  # a fresh quote, booked
    charge = LedgerEntry.objects.get(allocation=allocation)
    booked = allocation.quote
    assert (charge.amount, charge.net, charge.vat) == (
        booked.total,
        booked.net_total,
        booked.vat_total,
    )
    assert charge.quote_id == booked.pk


def test_reverse_charge_and_outside_eu_quotes_carry_their_legal_note(catalog, alice, client):
    _company(alice, legal_name="Acme GmbH", address="Hauptstr. 1", country="DE", vat_id=DE_VAT)
    quote = _quote(alice)
    client.force_login(alice)

    page = client.get(f"/quotes/{quote.pk}/").content.decode()

    assert "Reverse charge: the buyer accounts for the VAT." in page
    assert quote.tax_note in page
    _company(alice, legal_name="Acme Inc.", address="1 Main St", country="US", vat_id="")
    assert "Not taxable in the seller" in _quote(alice).tax_note


@pytest.mark.parametrize(
    "country, vat_id, field",
    [
        ("DE", "DE136695977", "vat_id"),  # a check digit off
        ("DE", "FR40303265045", "vat_id"),  # valid, but France's
        ("PL", "1234567890", "vat_id"),
        ("XX", "", "country"),
    ],
)
def test_an_invalid_vat_id_is_a_field_error_and_changes_nothing(
    catalog, alice, alice_api, country, vat_id, field
):
    team = personal_team(alice)
    with pytest.raises(Invalid) as refused:
        _company(alice, legal_name="Acme", address="Street 1", country=country, vat_id=vat_id)
    assert list(refused.value.errors) == [field]

    response = alice_api.patch(
        f"/api/v1/teams/{team.pk}/",
        {"legal_name": "Acme", "address": "Street 1", "country": country, "vat_id": vat_id},
        format="json",
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert field in str(response.json())
    team.refresh_from_db()
    assert (team.legal_name, team.country, team.vat_id) == ("", "", "")
    assert _quote(alice).tax_treatment == TaxTreatment.CONSUMER


def test_the_api_sets_buyer_details_in_their_stored_form(catalog, alice, alice_api):
    team = personal_team(alice)
    response = alice_api.patch(
        f"/api/v1/teams/{team.pk}/",
        {"legal_name": " Acme  sp. z o.o. ", "address": "ul. Prosta 1\n00-850 Warszawa",
         "country": "pl", "vat_id": "526-025-02-74"},
        format="json",
    )  # fmt: skip

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["legal_name"], body["country"], body["vat_id"]) == (
        "Acme sp. z o.o.",
        "PL",
        "PL" + PL_NIP,
    )
    assert body["tax_treatment"] == "domestic"


def test_a_billing_member_may_set_the_details_and_a_member_may_not(catalog, alice, bob):
    team = Team.objects.create(name="Acme")
    team.memberships.create(user=alice, role="owner")
    team.memberships.create(user=bob, role="billing")
    team_buyer_set(
        acting=acting_as(bob, team), legal_name="Acme", address="Street 1", country="AT",
        vat_id=AT_VAT,
    )  # fmt: skip
    team.memberships.filter(user=bob).update(role="member")

    with pytest.raises(NotAllowed, match="cannot do this"):
        team_buyer_set(
            acting=acting_as(bob, team), legal_name="", address="", country="", vat_id=""
        )
    team.refresh_from_db()
    assert team.vat_id == AT_VAT


@pytest.mark.parametrize(
    "currency, price, net, vat",
    [
        ("PLN", "1234.57", "1234.57", "283.95"),  # 283.9511
        ("EUR", "99.99", "99.99", "23.00"),  # 22.9977
        ("USD", "0.05", "0.05", "0.01"),  # 0.0115
        ("JPY", "18999", "18999", "4370"),  # 4369.77: no minor units
    ],
)
def test_quote_total_equals_charge_in_each_currency(catalog, alice, currency, price, net, vat):
    gpu_price_set(
        gpu_model=catalog.h100, period=catalog.week, unit_price=Decimal(price), currency=currency
    )

    allocation = book(alice)
    quote = allocation.quote

    assert quote.currency == currency
    assert (quote.net_total, quote.vat_total) == (Decimal(net), Decimal(vat))
    charge = LedgerEntry.objects.get(allocation=allocation)
    assert charge.amount == quote.total == Decimal(net) + Decimal(vat)
    assert charge.signed_vat == Decimal(vat)


def test_vat_is_rounded_once_per_quote_and_shared_over_its_lines(catalog, alice):
    quote = _quote(
        alice, gpu_count=3, options=[{"option": "nvme-scratch", "quantity": 1}]
    )  # 3 × 362.88 and 25.00

    lines = list(quote.lines.all())
    assert sum(line.vat for line in lines) == quote.vat_total
    assert quote.vat_total == (quote.net_total * Decimal("0.23")).quantize(Decimal("0.01"))


@given(
    nets=st.lists(
        st.decimals(min_value=0, max_value=10**6, places=2, allow_nan=False), min_size=1,
        max_size=8,
    ),
    rate=st.sampled_from([Decimal("0.23"), Decimal("0.08"), Decimal("0.05"), Decimal(0)]),
)  # fmt: skip
def test_vat_shares_always_add_up_to_the_rounded_total(nets, rate):
    shares, total = vat_split(nets, rate, "PLN")

    assert sum(shares) == total
    assert total == (sum(nets) * rate).quantize(Decimal("0.01"), "ROUND_HALF_UP")
    assert all(
        abs(share - net * rate) < Decimal("0.01") for share, net in zip(shares, nets, strict=True)
    )


def test_a_refund_mirrors_every_charge_net_and_vat(catalog, alice):
    allocation = book(alice, starts_at=db_now() + timedelta(days=2))
    acting = acting_as(alice)
    extension = extension_quote_create(acting=acting, allocation=allocation, period_count=1)
    allocation_extend(acting=acting, allocation=allocation, quote=extension)

    allocation_cancel(acting=acting, allocation=allocation)

    rows = LedgerEntry.objects.filter(allocation=allocation)
    charges = [r for r in rows if r.kind == LedgerKind.CHARGE]
    (refund,) = [r for r in rows if r.kind == LedgerKind.REFUND]
    assert len(charges) == 2
    assert refund.net == sum(c.net for c in charges)
    assert refund.vat == sum(c.vat for c in charges)
    assert refund.amount == sum(c.amount for c in charges)
    assert refund.quote_id is None


def test_the_ledger_api_and_csv_show_net_vat_and_gross(catalog, alice, alice_api):
    allocation = book(alice)
    quote = allocation.quote

    (row,) = alice_api.get("/api/v1/ledger/").json()["results"]
    assert (row["net"], row["vat"], row["amount"]) == ("362.88", "83.46", "446.34")
    assert Decimal(row["amount"]) == quote.total
    content = b"".join(alice_api.get("/api/v1/ledger/csv/").streaming_content).decode()
    (line,) = list(csv.DictReader(io.StringIO(content)))
    assert (line["net"], line["vat"], line["amount"]) == ("362.88", "83.46", "446.34")


@pytest.mark.parametrize(
    "details, vat_line",
    [
        ({}, "VAT 23 %: 83.46 USD"),
        (
            {
                "legal_name": "Acme GmbH",
                "address": "Hauptstr. 1",
                "country": "DE",
                "vat_id": DE_VAT,
            },
            "VAT (reverse charge): 0.00 USD",
        ),
    ],
    ids=["consumer", "reverse-charge"],
)
def test_the_booking_receipt_lists_net_the_vat_line_and_the_gross_charged(
    catalog, alice, details, vat_line
):
    from rentals.models import Notice, NoticeKind
    from rentals.texts import notice_text

    if details:
        _company(alice, **details)
    allocation = book(alice)
    quote = allocation.quote

    text = notice_text(Notice.objects.get(allocation=allocation, kind=NoticeKind.BOOKED))

    lines = text.splitlines()
    assert lines[1] == "1 × H100 SXM for 1 week: 362.88 USD"  # the quote's net line
    gross = f"{quote.total:,.2f} USD"
    assert lines[2:5] == ["Net: 362.88 USD", vat_line, f"Charged (gross): {gross}"]
    assert lines[5:] == ([quote.tax_note] if quote.tax_note else [])
