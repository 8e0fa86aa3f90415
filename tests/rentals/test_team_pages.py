"""The rental pages, through the test client: a rental of any of one's teams
opens and offers to act for its team; forms keep the team they were made for; a quote says
it was booked or expired before any click; an option that asks for input gets it and
cannot start now when it needs lead time; Polish "Start" is "Uruchom"; the staff page of
impaired allocations says why its remedies are blank and what "now" is."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.roles import TEAM_SESSION_KEY, acting_as, personal_team
from accounts.services.teams import team_create
from catalog.models import Option
from core.errors import Invalid
from rentals.models import Allocation, ImpairedSpan, Quote
from rentals.services import allocation_stop, quote_create
from tests.support.booking import book
from tests.support.operators import operator

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(catalog, alice):
    return team_create(user=alice, name="Lab")


def _acting_for(client, team):
    session = client.session
    session[TEAM_SESSION_KEY] = team.pk
    session.save()


def test_another_of_ones_teams_allocation_opens_and_offers_to_switch(lab, alice, bob, client):
    labs = book(alice, model="l4", count=1, period="day", team=lab)
    client.force_login(alice)  # acting for her personal team
    page = client.get(f"/allocations/{labs.pk}/").content.decode()
    assert 'id="other-team"' in page and "This allocation belongs to Lab" in page
    assert 'id="stop-button"' not in page
    assert client.get(f"/allocations/{labs.pk}/live/").status_code == 200
    answer = client.post(f"/allocations/{labs.pk}/stop/", follow=True)  # no form team
    assert "This belongs to Lab: act for Lab to change it." in answer.content.decode()
    labs.refresh_from_db()
    assert labs.state == "running"
    client.force_login(bob)
    assert client.get(f"/allocations/{labs.pk}/").status_code == 404


def test_a_form_keeps_the_team_it_was_made_for(lab, alice, client):
    labs = book(alice, model="l4", count=1, period="day", team=lab)
    quote = quote_create(acting=acting_as(alice, lab), gpu_model="l4", gpu_count=1,
                         period="day", period_count=1)  # fmt: skip
    client.force_login(alice)
    _acting_for(client, lab)
    page = client.get(f"/allocations/{labs.pk}/").content.decode()
    assert f'name="acting_team" value="{lab.pk}"' in page
    _acting_for(client, personal_team(alice))  # another tab switches
    client.post(f"/allocations/{labs.pk}/stop/", {"acting_team": lab.pk})
    labs.refresh_from_db()
    assert labs.state == "stopped"
    answer = client.post(f"/quotes/{quote.pk}/book/",
                         {"idempotency_key": str(uuid.uuid4()), "acting_team": lab.pk})  # fmt: skip
    booked = Allocation.objects.get(quote=quote)
    assert answer["Location"] == f"/allocations/{booked.pk}/" and booked.team == lab


def test_a_booked_quote_links_its_allocation_and_an_expired_one_offers_a_new_quote(
    catalog, alice, client
):
    booked = book(alice, model="l4", count=1, period="day")
    expired = quote_create(acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day",
                           period_count=1, now=timezone.now() - timedelta(minutes=16))  # fmt: skip
    client.force_login(alice)
    page = client.get(f"/quotes/{booked.quote_id}/").content.decode()
    assert 'id="quote-booked"' in page and f'href="/allocations/{booked.pk}/"' in page
    assert 'id="book-button"' not in page and 'id="valid-until"' not in page
    page = client.get(f"/quotes/{expired.pk}/").content.decode()
    assert 'id="quote-expired"' in page and 'id="book-button"' not in page
    answer = client.post(f"/quotes/{expired.pk}/requote/", follow=True)
    fresh = Quote.objects.exclude(pk__in=[expired.pk, booked.quote_id]).get()
    assert answer.redirect_chain[-1][0] == f"/quotes/{fresh.pk}/"
    assert 'id="book-button"' in answer.content.decode()


def test_an_extension_quote_used_says_extended(catalog, alice, client):
    allocation = book(alice, model="l4", count=1, period="day")
    client.force_login(alice)
    client.post(f"/allocations/{allocation.pk}/extension-quote/", {"period_count": "1"})
    quote = Quote.objects.get(kind="extension")
    client.post(f"/allocations/{allocation.pk}/extend/",
                {"quote": quote.pk, "idempotency_key": str(uuid.uuid4())})  # fmt: skip
    page = client.get(f"/quotes/{quote.pk}/").content.decode()
    assert 'id="quote-booked"' in page and "Extended" in page and 'id="book-button"' not in page


@pytest.fixture
def image_setup(catalog):
    """The test catalog's custom image asks which image and needs a day before the start."""
    Option.objects.filter(pk=catalog.setup.pk).update(
        input_label_en="Image to set up", input_label_pl="Obraz", lead_time=timedelta(hours=24)
    )
    return catalog.setup


def test_an_option_that_asks_gets_its_input_and_waits_its_lead_time(image_setup, alice):
    acting, later = acting_as(alice), timezone.now() + timedelta(days=2)
    request = {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1}
    with pytest.raises(Invalid) as refused:
        quote_create(acting=acting, **request, starts_at=later,
                     options=[{"option": "custom-image"}])  # fmt: skip
    assert refused.value.errors["options.0"] == ["Custom image asks for this: Image to set up."]
    with pytest.raises(Invalid) as refused:
        quote_create(acting=acting, **request,
                     options=[{"option": "custom-image", "input": "ghcr.io/a/b:1"}])  # fmt: skip
    assert "needs 24 hours before the start" in refused.value.errors["options.0"][0]
    with pytest.raises(Invalid) as refused:
        quote_create(acting=acting, **request, starts_at=later,
                     options=[{"option": "nvme-scratch", "quantity": 1, "input": "x"}])  # fmt: skip
    assert refused.value.errors["options.0"] == ["NVMe scratch takes no input."]
    assert Quote.objects.count() == 0
    quote = quote_create(acting=acting, **request, starts_at=later,
                         options=[{"option": "custom-image", "input": " ghcr.io/a/b:1 "}])  # fmt: skip
    line = quote.lines.get(option=image_setup)
    assert line.note == "ghcr.io/a/b:1"


def test_the_api_takes_and_shows_an_options_input(image_setup, alice_api, api):
    options = {o["slug"]: o for o in api.get("/api/v1/options/").json()}
    assert options["custom-image"]["input_label"] == "Image to set up"
    assert options["custom-image"]["lead_time_seconds"] == 86400
    assert options["nvme-scratch"]["lead_time_seconds"] == 0
    start = (timezone.now() + timedelta(days=2)).isoformat()
    answer = alice_api.post("/api/v1/quotes/", {
        "gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1,
        "starts_at": start, "options": [{"option": "custom-image", "input": "ghcr.io/a/b:1"}],
    }, format="json")  # fmt: skip
    assert answer.status_code == 201, answer.json()
    line = answer.json()["lines"][1]
    assert line["note"] == "ghcr.io/a/b:1" and line["description"].endswith("— ghcr.io/a/b:1")


def test_the_booking_form_shows_option_prices_and_asks_for_the_image(image_setup, alice, client):
    client.force_login(alice)
    page = client.get("/book/h100/").content.decode()
    assert "150.00 USD, charged once" in page
    assert "4.00 USD per day · 25.00 USD per week · 90.00 USD per month" in page
    assert 'name="option_custom-image_input"' in page
    assert "Needs 24 hours before the start: it cannot start now." in page
    answer = client.post("/book/h100/", {
        "gpu_count": "1", "period": "day", "period_count": "1", "start": "now",
        "option_custom-image": "1", "option_custom-image_input": "ghcr.io/a/b:1",
    })  # fmt: skip
    assert (
        answer.status_code == 200 and "needs 24 hours before the start" in answer.content.decode()
    )
    assert Quote.objects.count() == 0


def test_the_catalog_says_per_gpu_and_excl_vat(catalog, client):
    page = client.get("/").content.decode()
    assert "Prices per GPU, excl. VAT (the quote adds it):" in page
    polish = client.get("/", HTTP_ACCEPT_LANGUAGE="pl").content.decode()
    assert "Ceny za jeden GPU, bez VAT (wycena go dolicza):" in polish


def test_the_polish_start_button_says_uruchom(catalog, alice, client):
    allocation = book(alice, model="l4", count=1, period="day")
    allocation_stop(acting=acting_as(alice), allocation=allocation)
    client.force_login(alice)
    page = client.get(f"/allocations/{allocation.pk}/", HTTP_ACCEPT_LANGUAGE="pl")
    button = page.content.decode().split('id="start-button">')[1].split("<")[0]
    assert button == "Uruchom"


def test_the_impaired_page_says_why_remedies_are_blank_and_what_now_is(
    catalog, alice, staff, client
):
    allocation = book(alice, model="h100", count=1, period="week")
    ImpairedSpan.objects.create(
        allocation=allocation, started_at=allocation.paid_from + timedelta(minutes=5),
        ended_at=allocation.paid_from + timedelta(minutes=50),
        gpus=[allocation.current_holdings[0].gpu_id],
    )  # fmt: skip
    client.force_login(staff)  # staff without the remedies' permissions
    page = client.get("/impaired/").content.decode()
    row = page.split(f'id="impaired-{allocation.pk}"')[1].split("</tr>")[0]
    assert "Read only: replacing GPUs and issuing credits need their permissions" in row
    assert "working again since" in row
    assert ">working again<" not in row
    client.force_login(operator("ops"))
    row = client.get("/impaired/").content.decode().split(f'id="impaired-{allocation.pk}"')[1]
    assert "credit-button" in row.split("</tr>")[0] and "Read only" not in row.split("</tr>")[0]
