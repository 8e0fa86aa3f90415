"""Page flows through the same services as the API (the browser tests drive the rest)."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.roles import acting_as
from catalog.services import gpu_price_set
from rentals.models import Allocation, LedgerEntry, Quote
from rentals.services import allocation_cancel, allocation_stop, quote_create
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def test_expired_quote_is_requoted_with_the_new_total(catalog, alice, client):
    client.force_login(alice)
    # Quoted 16 minutes ago (validity 15): services judge expiry on the database clock.
    quote = quote_create(acting=acting_as(alice), gpu_model="l4", gpu_count=2, period="day", period_count=2,
        options=[{"option": "nvme-scratch", "quantity": 3}],
        now=timezone.now() - timedelta(minutes=16),
    )  # fmt: skip
    gpu_price_set(gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("20.00"))
    response = client.post(
        f"/quotes/{quote.pk}/book/", {"idempotency_key": str(uuid.uuid4())}, follow=True
    )
    fresh = Quote.objects.exclude(pk=quote.pk).get()
    assert response.redirect_chain[-1][0] == f"/quotes/{fresh.pk}/"
    assert fresh.net_total == Decimal("104.00")  # 2×20×2 + 3×4×2
    assert "94.46 USD → 127.92 USD" in response.content.decode().replace("&gt;", ">")
    assert Allocation.objects.count() == 0 and LedgerEntry.objects.count() == 0


def test_stop_start_extend_and_cancel_from_the_page(catalog, alice, bob, client):
    allocation = book(alice, model="l4", count=1, period="day")
    client.force_login(bob)
    assert client.get(f"/allocations/{allocation.pk}/").status_code == 404
    assert client.post(f"/allocations/{allocation.pk}/stop/").status_code == 404
    client.force_login(alice)
    until = allocation.paid_until
    client.post(f"/allocations/{allocation.pk}/stop/")
    allocation.refresh_from_db()
    assert (allocation.state, allocation.paid_until) == ("stopped", until)
    client.post(f"/allocations/{allocation.pk}/start/")
    key = str(uuid.uuid4())
    for _ in range(2):  # a resubmitted extend form extends once
        client.post(
            f"/allocations/{allocation.pk}/extend/", {"period_count": "2", "idempotency_key": key}
        )
    allocation.refresh_from_db()
    assert allocation.paid_until == until + timedelta(days=2)
    response = client.post(f"/allocations/{allocation.pk}/cancel/", follow=True)
    assert "Only a scheduled allocation can be cancelled" in response.content.decode()
    assert client.post(f"/allocations/{allocation.pk}/explode/").status_code == 404


def test_tokens_page_creates_shows_once_and_revokes(alice, client, api):
    client.force_login(alice)
    answer = client.post("/account/tokens/", {"name": "laptop"})
    assert (answer.status_code, answer["Location"]) == (302, "/account/tokens/")  # PRG
    page = client.get("/account/tokens/").content.decode()
    secret = page.split('id="new-token">')[1].split("<")[0]
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/ledger/").status_code == 200
    assert secret not in client.get("/account/tokens/").content.decode()
    from accounts.models import ApiToken

    client.post("/account/tokens/", {"revoke": ApiToken.objects.get().pk})
    assert api.get("/api/v1/ledger/").status_code == 401


def test_the_list_puts_what_runs_first_with_what_each_paid(catalog, alice, staff, client):
    now = timezone.now()
    later = book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(days=9))
    sooner = book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(days=2))
    cancelled = book(alice, model="l4", count=2, period="day", starts_at=now + timedelta(days=4))
    allocation_cancel(acting=acting_as(alice), allocation=cancelled)
    running = book(alice, model="h100", count=2, period="week")  # booked last, listed first
    stopped = book(alice, model="l4", count=1, period="day")
    allocation_stop(acting=acting_as(alice), allocation=stopped)

    client.force_login(alice)
    page = client.get("/allocations/").content.decode().replace("\xa0", " ")
    order = [page.index(f'href="/allocations/{a.pk}/"') for a in (running, stopped, sooner, later)]
    assert order == sorted(order) and page.index(str(cancelled.pk)) > order[-1]
    assert f"{running.quote.total:,.2f} USD" in page  # what it paid
    assert "0.00 USD" in page  # the cancelled one: charged, then refunded in full
    client.force_login(staff)  # staff read every team's, and the menu says so
    assert "All allocations" in client.get("/allocations/").content.decode()


def test_a_scheduled_allocation_says_when_it_starts_and_draws_no_now(catalog, alice, client):
    allocation = book(
        alice, model="l4", count=1, period="week", starts_at=timezone.now() + timedelta(days=3)
    )
    client.force_login(alice)
    page = client.get(f"/allocations/{allocation.pk}/").content.decode()
    assert "Starts in 72.0 hours" in page or "Starts in 71.9 hours" in page
    assert "paid hours left" not in page and 'class="now"' not in page
    assert 'id="charts"' not in page and "Nothing has run yet" in page


def test_staff_reading_another_teams_allocation_see_whose_it_is(catalog, alice, staff, client):
    allocation = book(alice, model="l4", count=1, period="day")
    client.force_login(staff)
    page = client.get(f"/allocations/{allocation.pk}/").content.decode()
    assert "Staff view: this allocation belongs to alice" in page
    assert 'id="stop-button"' not in page


def test_the_allocation_page_says_what_is_its_alone_and_whether_the_node_is_shared(
    catalog, alice, bob, client
):
    """The share it was sold (the quote's snapshot, not today's catalog), whether other
    customers hold GPUs of its node now, and what stop ends."""
    from catalog.models import GpuModel, Node, NodeState

    node = Node.objects.filter(gpu_model=catalog.h100).order_by("hostname").first()
    Node.objects.filter(gpu_model=catalog.h100).exclude(pk=node.pk).update(
        state=NodeState.MAINTENANCE
    )
    mine = book(alice, count=2)
    GpuModel.objects.filter(pk=catalog.h100.pk).update(vcpus_per_gpu=8, ram_gib_per_gpu=64)
    client.force_login(alice)
    page = client.get(f"/allocations/{mine.pk}/").content.decode()
    assert "Yours alone: these GPUs, 48 vCPUs of CPU time and 512 GiB of memory." in page
    assert 'id="node-not-shared"' in page and 'id="node-shared"' not in page
    assert "Every process of this allocation ends now" in page
    book(bob, count=3)  # another customer, on the same node
    book(alice, count=1)  # her own team's: not another customer
    page = client.get(f"/allocations/{mine.pk}/").content.decode()
    assert "Other customers hold 3 GPUs of this node now." in page


def test_the_catalog_and_the_quote_show_the_host_share_sold_with_each_gpu(catalog, alice, client):
    quote = quote_create(acting=acting_as(alice), gpu_model="h100", gpu_count=2, period="day",
                         period_count=1)  # fmt: skip
    client.force_login(alice)
    assert "24 vCPUs, 256 GiB RAM" in client.get("/").content.decode()
    assert (
        "With the GPUs, for you alone: 48 vCPUs and 512 GiB of host memory "
        "(24 vCPUs and 256 GiB per GPU)." in client.get(f"/quotes/{quote.pk}/").content.decode()
    )
    api_model = client.get("/api/v1/gpu-models/").json()
    h100 = next(m for m in api_model["results"] if m["slug"] == "h100")
    assert (h100["vcpus_per_gpu"], h100["ram_gib_per_gpu"]) == (24, 256)


def test_list_pages_have_pinned_query_counts(catalog, alice, client, django_assert_max_num_queries):
    client.force_login(alice)
    for _ in range(3):
        book(alice, model="h100", count=1, period="day")

    def queries(url):
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    counts = {url: queries(url) for url in ("/allocations/", "/statement/", "/")}
    for _ in range(5):
        book(alice, model="h100", count=1, period="day")
    assert {url: queries(url) for url in counts} == counts
