"""The booking form's running total: priced by the quote's own code, stored nowhere, and the
form's inputs (checkbox options, the GPU count's bound) as the quote reads them."""

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.roles import acting_as
from catalog.services import gpu_price_set
from core.errors import Invalid
from rentals.forms import QuoteForm
from rentals.models import Quote, QuoteLine
from rentals.services import quote_create, quote_estimate
from tests.support.booking import book

pytestmark = pytest.mark.django_db

REQUEST = {"gpu_model": "h100", "gpu_count": 2, "period": "day", "period_count": 3}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(min_value=1, max_value=8),
    periods=st.integers(min_value=1, max_value=52),
    period=st.sampled_from(["day", "week", "month"]),
    scratch=st.integers(min_value=0, max_value=16),
    image=st.booleans(),
)
def test_the_estimate_is_the_quote_line_for_line(
    catalog, alice, count, periods, period, scratch, image
):
    options = [{"option": "nvme-scratch", "quantity": scratch}] if scratch else []
    options += [{"option": "custom-image", "quantity": 1}] if image else []
    request = {"gpu_model": "h100", "gpu_count": count, "period": period,
               "period_count": periods, "options": options}  # fmt: skip

    estimate = quote_estimate(**request)
    quote = quote_create(acting=acting_as(alice), **request)

    def facts(q):
        return [
            (line.kind, line.option_id, line.count, line.periods, line.quantity, line.unit_price,
             line.amount)
            for line in q.lines.all()
        ]  # fmt: skip

    assert facts(estimate) == facts(quote)
    assert (estimate.total, estimate.currency) == (quote.total, quote.currency)
    assert estimate.paid_until - estimate.paid_from == quote.paid_until - quote.paid_from
    Quote.objects.all().delete()


def test_an_estimate_stores_nothing_and_follows_a_new_price(catalog):
    before = quote_estimate(**REQUEST).net_total
    gpu_price_set(gpu_model=catalog.h100, period=catalog.day, unit_price=Decimal("10.00"))

    after = quote_estimate(**REQUEST)

    assert before == Decimal("57.60") * 6 and after.net_total == Decimal("60.00")
    assert after.total == Decimal("73.80")  # a consumer: 23 % VAT
    assert Quote.objects.count() == 0 and QuoteLine.objects.count() == 0


def test_an_estimate_refuses_what_a_quote_refuses_with_the_same_fields(catalog):
    with pytest.raises(Invalid) as error:
        quote_estimate(**REQUEST | {"gpu_count": 9, "period": "fortnight"})
    assert {"gpu_count", "period"} <= error.value.errors.keys()


def test_a_full_fleet_still_prices_and_says_when_it_fits(catalog, alice, bob, client):
    first = book(bob, model="l4", count=4, period="day")
    client.force_login(alice)

    part = client.post(
        "/book/l4/estimate/",
        {"gpu_count": "2", "period": "day", "period_count": "1", "start": "now"},
    )  # fmt: skip

    assert part.status_code == 200
    assert part.context["estimate"].net_total == Decimal("26.40")
    assert part.context["estimate_refusal"].earliest_start == first.paid_until
    assert "The earliest start that fits is" in part.content.decode()
    assert Quote.objects.filter(user=alice).count() == 0


def test_the_estimate_part_prices_the_form_and_words_it_as_an_estimate(catalog, alice, client):
    client.force_login(alice)
    part = client.post(
        "/book/l4/estimate/",
        {"gpu_count": "2", "period": "day", "period_count": "2", "start": "now",
         "option_nvme-scratch": "1", "option_custom-image": "1"},
    )  # fmt: skip
    html = part.content.decode()
    estimate = part.context["estimate"]
    assert estimate.net_total == Decimal("210.80")  # 2×13.20×2 + 4.00×2 + 150
    assert 'id="quote-net">210.80 USD<' in html and 'id="estimate-total">259.28 USD<' in html
    assert "fixes the price for 15 minutes" in html
    assert "Free for that start right now" in html
    assert Quote.objects.count() == 0


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"gpu_count": "9"}, "GPUs"),
        ({"gpu_count": "x"}, "GPUs"),
        ({"period": "fortnight"}, "Rental period"),
        ({"period_count": "0"}, "Number of periods"),
        ({"option_nvme-scratch": "17"}, "NVMe scratch (TB)"),
        ({"start": "later", "starts_at": "2020-01-01T00:00"}, "Start (UTC)"),
        ({"region": "mars"}, "Region"),
    ],
)
def test_bad_input_shows_field_errors_in_the_part_never_a_500(catalog, alice, client, data, field):
    client.force_login(alice)
    part = client.post(
        "/book/h100/estimate/",
        {"gpu_count": "1", "period": "day", "period_count": "1", "start": "now"} | data,
    )
    assert part.status_code == 200
    assert part.context["estimate"] is None
    assert field in [label for label, _message in part.context["estimate_errors"]]
    assert 'id="estimate-errors"' in part.content.decode()


def test_the_estimate_part_is_for_signed_in_people_and_posts_only(catalog, alice, client):
    assert client.post("/book/h100/estimate/", {})["Location"].startswith("/account/login/")
    client.force_login(alice)
    assert client.get("/book/h100/estimate/").status_code == 405
    assert client.post("/book/nope/estimate/", {}).status_code == 404


def test_the_page_opens_with_the_estimate_of_its_defaults_without_script(catalog, alice, client):
    client.force_login(alice)
    page = client.get("/book/h100/")
    html = page.content.decode()
    assert page.context["estimate"].net_total == Decimal("57.60")  # 1 GPU for 1 day
    assert 'hx-post="/book/h100/estimate/"' in html and 'id="estimate-total"' in html


def test_on_off_options_are_checkboxes_and_quantities_are_number_boxes(catalog, alice, client):
    client.force_login(alice)
    html = client.get("/book/h100/").content.decode()
    assert 'type="checkbox" name="option_custom-image" value="1"' in html
    assert 'type="number" name="option_nvme-scratch"' in html
    assert "NVMe scratch (TB)" in html and "Public IPv4 (address)" in html


@pytest.mark.parametrize(
    ("sent", "quantity"), [({"option_custom-image": "1"}, 1), ({"option_custom-image": "on"}, 1),
                           ({"option_custom-image": "0"}, None), ({}, None)],
)  # fmt: skip
def test_a_checkbox_option_means_what_the_number_box_meant(catalog, sent, quantity):
    form = QuoteForm(
        {"gpu_count": "1", "period": "day", "period_count": "1", "start": "now"} | sent,
        gpu_model=catalog.h100,
    )
    assert form.is_valid(), form.errors
    chosen = {o["option"]: o["quantity"] for o in form.quote_input()["options"]}
    assert chosen.get("custom-image") == quantity


def test_the_gpu_count_stops_at_the_largest_node(catalog, alice, client):
    form = QuoteForm(
        {"gpu_count": "9", "period": "day", "period_count": "1", "start": "now"},
        gpu_model=catalog.h100,
    )
    assert not form.is_valid()
    assert form.errors["gpu_count"] == [
        "At most 8 GPUs of this model fit on one node; an allocation uses one node."
    ]
    assert form.fields["gpu_count"].widget.attrs["max"] == 8
    l4 = QuoteForm(gpu_model=catalog.l4)
    assert 'max="4"' in str(l4["gpu_count"])

    client.force_login(alice)
    page = client.post("/book/h100/", {"gpu_count": "64", "period": "day", "period_count": "1",
                                       "start": "now"})  # fmt: skip
    assert page.status_code == 200 and Quote.objects.count() == 0
    assert "At most 8 GPUs of this model fit on one node" in page.content.decode()


def test_the_calendar_has_a_scale_and_none_free_looks_different(catalog, alice, bob, client):
    book(bob, model="l4", count=4, period="day")  # the only L4 node is full today
    client.force_login(alice)
    page = client.get("/book/l4/")
    html = page.content.decode()
    first_week = page.context["calendar_weeks"][0]
    today, later = first_week[0], page.context["calendar_weeks"][2][0]
    assert (today["free"], today["shade"]) == (0, 0)
    assert (later["free"], later["shade"]) == (4, 50)
    assert [s["free"] for s in page.context["calendar_scale"]] == [0, 1, 2, 3, 4]
    assert 'id="calendar-legend"' in html and 'class="cal-none"' in html
    assert f'<span class="cal-date">{today["date"]:%d.%m}</span>' in html
    assert "GPUs free on one node (of 4):" in html


def test_the_book_page_reads_the_options_and_their_prices_once(catalog, alice, client):
    """The form shown and the copy the estimate prices share the options as read."""
    client.force_login(alice)
    with CaptureQueriesContext(connection) as ctx:
        page = client.get("/book/h100/")
    assert page.status_code == 200
    reads = [
        q["sql"] for q in ctx.captured_queries
        if 'FROM "catalog_option" ' in q["sql"] or 'FROM "catalog_optionprice" ' in q["sql"]
    ]  # fmt: skip
    assert len(reads) == 2
    assert page.context["form"].options and page.context["estimate"] is not None
