"""Invoice details name real countries and the buyer's own VAT ID: the
form offers only ISO 3166 countries, a VAT ID of another country is refused, and teams that
already hold such details are taxed as consumers from their next quote, with a review that
staff see, until an owner corrects them."""

import importlib
import re

import pytest
from django.apps import apps
from django.core.management import call_command

from accounts.models import BuyerReview, Team
from accounts.roles import acting_as, personal_team
from accounts.services.teams import team_buyer_set, teams_buyer_recheck
from core.errors import Invalid
from core.vat import TaxTreatment
from rentals.services import quote_create

pytestmark = pytest.mark.django_db

MADE_UP = ["EU", "EZ", "UN", "QO", "XA", "XB", "XK", "ZZ", "AC", "IC"]
ADDRESS = "Street 1\n00-001 Town"


def _quote(user):
    return quote_create(
        acting=acting_as(user), gpu_model="h100", gpu_count=1, period="week", period_count=1
    )


def test_the_form_offers_only_iso_3166_countries_in_both_languages(alice, client):
    client.force_login(alice)
    team = personal_team(alice)
    for language in ("en", "pl"):
        page = client.get(f"/teams/{team.pk}/?lang={language}").content.decode()
        select = re.search(r'<select name="country"[^>]*>(.*?)</select>', page, re.S).group(1)
        codes = re.findall(r'<option value="([A-Z]*)"', select)

        assert len(codes) == 1 + 249 and codes[0] == ""
        assert {"PL", "DE", "GR", "US", "GB"} <= set(codes)
        assert not set(MADE_UP) & set(codes)
        assert "Pseudo" not in select and "Unknown" not in select and "Nieznany" not in select


@pytest.mark.parametrize("country", MADE_UP)
def test_a_made_up_country_is_refused_by_the_api(alice, alice_api, country):
    team = personal_team(alice)
    response = alice_api.patch(
        f"/api/v1/teams/{team.pk}/",
        {"legal_name": "Acme", "address": ADDRESS, "country": country, "vat_id": ""},
        format="json",
    )
    assert response.status_code == 400 and "country" in str(response.json())
    team.refresh_from_db()
    assert (team.legal_name, team.country) == ("", "")


@pytest.mark.parametrize(
    "country, vat_id, other",
    [
        ("US", "DE136695976", "Germany"),  # an EU VAT ID outside the EU: was "not taxable"
        ("PL", "DE136695976", "Germany"),  # was read as PLDE136695976 (a check-digit error)
        ("AT", "FR40303265045", "France"),
        ("CY", "EL094014201", "Greece"),
        ("CH", "GB980780684", "United Kingdom"),  # a valid UK number, not a Swiss one
        ("GR", "GR094014201", None),  # Greece's prefix is EL, as before
    ],
)
def test_a_vat_id_of_another_country_than_the_buyer_s_is_refused(alice, country, vat_id, other):
    with pytest.raises(Invalid) as refused:
        team_buyer_set(
            acting=acting_as(alice), legal_name="Acme", address=ADDRESS, country=country,
            vat_id=vat_id,
        )  # fmt: skip
    assert list(refused.value.errors) == ["vat_id"]
    if other:
        assert f"is a VAT ID of {other}, not of" in refused.value.errors["vat_id"][0]
    assert personal_team(alice).legal_name == ""


@pytest.mark.parametrize(
    "country, vat_id, stored",
    [
        ("GR", "EL094014201", "EL094014201"),
        ("GR", "094014201", "EL094014201"),
        ("PL", "526-025-02-74", "PL5260250274"),
        ("AT", "U13585627", "ATU13585627"),
        ("GB", "XI980780684", "XI980780684"),  # Northern Ireland's prefix
        ("US", "12-3456789", "12-3456789"),
        ("MX", "CAR910101AB1", "CAR910101AB1"),  # an RFC: its letters are no country prefix
    ],
)
def test_the_buyer_s_own_tax_ids_are_kept(alice, country, vat_id, stored):
    team = team_buyer_set(
        acting=acting_as(alice), legal_name="Acme", address=ADDRESS, country=country,
        vat_id=vat_id,
    )  # fmt: skip
    assert team.vat_id == stored


def _stored(user, **details) -> Team:
    """Details saved before the checks existed (the database took them as they came)."""
    team = personal_team(user)
    Team.objects.filter(pk=team.pk).update(legal_name="Acme", address=ADDRESS, **details)
    team.refresh_from_db()
    return team


def test_teams_that_hold_such_details_are_taxed_as_consumers_and_staff_see_them(
    catalog, alice, bob, client, alice_api
):
    fake = _stored(alice, country="EU", vat_id="")
    mismatch = _stored(bob, country="US", vat_id="DE136695976")

    # Their next quotes: the standard rate, not "not taxable here".
    assert (_quote(alice).tax_treatment, _quote(bob).tax_treatment) == (
        TaxTreatment.CONSUMER,
        TaxTreatment.CONSUMER,
    )
    body = alice_api.get(f"/api/v1/teams/{fake.pk}/").json()
    assert body["tax_treatment"] == "consumer" and list(body["invoice_details_problems"]) == [
        "country"
    ]
    client.force_login(alice)
    page = client.get(f"/teams/{fake.pk}/").content.decode()
    assert 'id="buyer-problems"' in page and "taxed at the standard rate" in page

    # The release's data migration finds them, with what their quotes had.
    migration = importlib.import_module("accounts.migrations.0016_buyer_reviews_of_stored_details")
    migration.review_stored_details(apps, None)
    reviews = {r.team_id: r for r in BuyerReview.objects.all()}
    assert set(reviews) == {fake.pk, mismatch.pk}
    assert (reviews[fake.pk].problem, reviews[fake.pk].treatment_before) == (
        "not_a_country",
        "outside_eu",
    )
    assert (reviews[mismatch.pk].problem, reviews[mismatch.pk].vat_id) == (
        "foreign_vat_id",
        "DE136695976",
    )
    assert all(r.treatment_now == "consumer" and r.resolved_at is None for r in reviews.values())
    assert teams_buyer_recheck() == {"opened": [], "closed": []}  # found once

    # Staff: the reviews' list and the teams' filter.
    from tests.support.factories.accounts import person

    root = person("root", "pw-root-123456", is_staff=True, is_superuser=True)
    client.force_login(root)
    listed = client.get("/admin/accounts/buyerreview/?resolved_at__isempty=1").content.decode()
    assert "outside_eu" in listed or "not taxable here" in listed
    assert "DE136695976" in listed
    filtered = client.get("/admin/accounts/team/?invoice_details=review").content.decode()
    assert f"/admin/accounts/team/{fake.pk}/change/" in filtered
    assert f"/admin/accounts/team/{mismatch.pk}/change/" in filtered

    # An owner corrects the details: the review closes, quotes follow the details again.
    team_buyer_set(
        acting=acting_as(bob), legal_name="Acme GmbH", address=ADDRESS, country="DE",
        vat_id="DE136695976",
    )  # fmt: skip
    assert BuyerReview.objects.get(team=mismatch).resolved_at is not None
    assert _quote(bob).tax_treatment == TaxTreatment.REVERSE_CHARGE
    filtered = client.get("/admin/accounts/team/?invoice_details=review").content.decode()
    assert f"/admin/accounts/team/{mismatch.pk}/change/" not in filtered


def test_the_recheck_command_finds_details_that_stopped_passing(catalog, alice, capsys):
    team = _stored(alice, country="PL", vat_id="DE136695976")

    call_command("teams_buyer_recheck")

    review = BuyerReview.objects.get(team=team)
    assert (review.problem, review.treatment_before, review.treatment_now) == (
        "foreign_vat_id",
        "domestic",
        "consumer",
    )
    assert "1 teams' invoice details no longer pass" in capsys.readouterr().out
    Team.objects.filter(pk=team.pk).update(vat_id="PL5260250274")
    assert teams_buyer_recheck() == {"opened": [], "closed": [team.pk]}
    assert BuyerReview.objects.get(team=team).resolved_at is not None
