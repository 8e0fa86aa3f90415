"""A region chosen when booking: the quote remembers it and the booking places only there."""

import uuid

import pytest

from accounts.roles import acting_as
from core.errors import Invalid
from rentals.errors import NoCapacity
from rentals.models import Allocation, Quote
from rentals.services import allocation_book, quote_create
from tests.support.booking import book
from tests.support.factories.catalog import NodeFactory, RegionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def frankfurt(catalog):
    """A second region: two whole 8-GPU H100 nodes in one network group, and one L4 node."""
    region = RegionFactory(slug="de-fra", name_en="Frankfurt")
    for _ in range(2):
        NodeFactory(
            gpu_model=catalog.h100, region=region, gpus=8, network_group="fra-1",
            fabric="RoCE 200 Gb/s",
        )  # fmt: skip
    NodeFactory(gpu_model=catalog.l4, region=region, gpus=4)
    return region


def _quote(user, **request):
    return quote_create(
        acting=acting_as(user), gpu_model="l4", period="day", period_count=1, **request
    )


@pytest.mark.parametrize("region", ["de-fra", "pl-waw"])
def test_a_quote_for_a_region_places_only_on_its_nodes(catalog, frankfurt, alice, region):
    quote = _quote(alice, gpu_count=4, region=region)
    allocation = allocation_book(acting=acting_as(alice), quote=quote)

    assert quote.region.slug == allocation.node.region.slug == region
    with pytest.raises(NoCapacity):  # the region's one L4 node is full, the other's is free
        _quote(alice, gpu_count=4, region=region)
    other = allocation_book(acting=acting_as(alice), quote=_quote(alice, gpu_count=4))
    assert other.node.region.slug != region  # any region: the other one


def test_a_full_region_refuses_though_another_has_room(catalog, frankfurt, alice, bob):
    taken = book(bob, model="l4", count=4, period="day")  # one of the two L4 nodes
    elsewhere = "pl-waw" if taken.node.region.slug == "de-fra" else "de-fra"
    full = taken.node.region.slug

    with pytest.raises(NoCapacity) as refused:
        _quote(alice, gpu_count=1, region=full)

    assert refused.value.earliest_start == taken.paid_until  # in that region, not now elsewhere
    assert taken.node.region.name in refused.value.detail
    assert _quote(alice, gpu_count=1, region=elsewhere).region.slug == elsewhere
    assert _quote(alice, gpu_count=1).region is None  # any region: the other node fits now


def test_a_region_quote_whose_region_filled_up_is_not_booked_elsewhere(
    catalog, frankfurt, alice, bob
):
    mine = _quote(alice, gpu_count=4, region="de-fra")
    allocation_book(acting=acting_as(bob), quote=_quote(bob, gpu_count=4, region="de-fra"))

    with pytest.raises(NoCapacity):  # Frankfurt's one L4 node is taken; Warsaw's is free
        allocation_book(acting=acting_as(alice), quote=mine)

    assert not Allocation.objects.filter(user=alice).exists()


def test_a_cluster_for_a_region_takes_whole_nodes_there(catalog, frankfurt, alice):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", node_count=2, period="day", period_count=1,
        region="de-fra",
    )  # fmt: skip
    allocation_book(acting=acting_as(alice), quote=quote)
    nodes = {a.node for a in Allocation.objects.select_related("node__region")}
    assert len(nodes) == 2 and {n.region.slug for n in nodes} == {"de-fra"}


@pytest.mark.parametrize(
    ("region", "message"),
    [("mars", "Unknown region: mars."), ("us-east", "MI300X is not offered in Ashburn.")],
)
def test_a_region_without_the_model_is_a_field_error(catalog, alice, region, message):
    RegionFactory(slug="us-east", name_en="Ashburn")
    with pytest.raises(Invalid) as error:
        quote_create(
            acting=acting_as(alice), gpu_model="mi300x", gpu_count=1, period="day",
            period_count=1, region=region,
        )  # fmt: skip
    assert error.value.errors == {"region": [message]}
    assert Quote.objects.count() == 0


def test_the_api_quotes_for_a_region_and_says_so(catalog, frankfurt, alice_api):
    body = {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1}
    anywhere = alice_api.post("/api/v1/quotes/", body, format="json")
    there = alice_api.post("/api/v1/quotes/", body | {"region": "de-fra"}, format="json")
    unknown = alice_api.post("/api/v1/quotes/", body | {"region": "mars"}, format="json")

    assert (anywhere.status_code, there.status_code, unknown.status_code) == (201, 201, 400)
    assert anywhere.json()["region"] is None and there.json()["region"] == "de-fra"
    assert "region" in unknown.json()["errors"]
    booked = alice_api.post(
        "/api/v1/bookings/", {"quote": there.json()["id"]}, format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )  # fmt: skip
    assert booked.status_code == 201
    assert Allocation.objects.get().node.region == frankfurt
    assert alice_api.get(f"/api/v1/quotes/{there.json()['id']}/").json()["region"] == "de-fra"


def test_the_schema_offers_the_region(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    quote_in = schema["components"]["schemas"]["QuoteInRequest"]["properties"]
    assert quote_in["region"]["type"] == "string" and quote_in["region"]["nullable"] is True
    assert "region" in schema["components"]["schemas"]["Quote"]["properties"]


def test_the_booking_form_quotes_for_the_chosen_region_and_the_quote_says_so(
    catalog, frankfurt, alice, client
):
    client.force_login(alice)
    page = client.get("/book/l4/", {"region": "de-fra"})
    html = page.content.decode()
    assert '<option value="de-fra" selected>Frankfurt</option>' in html
    assert page.context["calendar_nodes"] == 1  # the calendar follows the region too

    response = client.post(
        "/book/l4/",
        {"gpu_count": "1", "period": "day", "period_count": "1", "start": "now",
         "region": "de-fra"},
    )  # fmt: skip
    quote = Quote.objects.get()
    assert response["Location"] == f"/quotes/{quote.pk}/" and quote.region == frankfurt
    assert "Region: Frankfurt" in client.get(response["Location"]).content.decode()
