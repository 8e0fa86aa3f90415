"""A customer books from the catalog to a running allocation and manages it; staff watch."""

import re
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from playwright.sync_api import expect

from accounts.services.profile import account_preferences_set
from rentals.models import Allocation, LedgerEntry
from rentals.simulation import simulated_fleet
from telemetry.models import GpuSample
from telemetry.poll import poll_nodes
from telemetry.simulator import Simulator
from tests.e2e.conftest import axe_serious, login, screenshot
from tests.support.browser import get_quote

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _wait_for_points(page, *, more_than, timeout=20.0):
    """Poll the chart's point count from Python: the page's CSP forbids the string eval
    that page.wait_for_function needs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        points = int(page.locator("#charts").get_attribute("data-points") or 0)
        if points > more_than:
            return points
        page.wait_for_timeout(100)
    raise AssertionError(f"the charts never showed more than {more_than} points")


def test_customer_books_stops_starts_extends_and_sees_charts(catalog, alice, page, live_server):
    simulator = Simulator(simulated_fleet, refresh=0.0).start_in_thread()
    try:
        login(page, live_server, "alice", "pw-alice-123456")
        page.goto(live_server.url + "/")
        page.get_by_role("link", name="Book L4").click()
        get_quote(page, live_server)
        assert page.locator("#quote-net").inner_text() == "60.80 USD"  # 2×13.20×2 + 4.00×2
        assert page.locator("#quote-total").inner_text() == "74.78 USD"  # with 23 % VAT
        screenshot(page, "quote")
        assert axe_serious(page) == []
        page.get_by_role("button", name="Book").click()
        page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
        assert page.locator("#state").inner_text() == "running"
        paid_until = page.locator("#paid-until").inner_text()

        allocation = Allocation.objects.get()
        for node in catalog.nodes:
            node.telemetry_url = simulator.url_for(node.hostname)
            node.save(update_fields=["telemetry_url"])
        poll_nodes([allocation.node_id])
        page.on("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Stop").click()
        page.wait_for_load_state()
        assert page.locator("#state").inner_text() == "stopped"
        assert page.locator("#paid-until").inner_text() == paid_until
        assert page.get_by_text("Stopped. The paid period keeps running.").is_visible()
        page.get_by_role("button", name="Start").click()
        page.wait_for_load_state()
        assert page.locator("#state").inner_text() == "running"
        assert page.locator("#paid-until").inner_text() == paid_until

        page.get_by_label("Extend by (periods of one day)").select_option("1")
        page.get_by_role("button", name="See the price").click()
        page.wait_for_url(re.compile(r"/quotes/"))
        assert page.get_by_text("Your extension quote").is_visible()
        total = page.locator("#quote-total").inner_text()
        screenshot(page, "extension-quote")
        page.get_by_role("button", name="Extend").click()
        page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
        assert page.locator("#paid-until").inner_text() != paid_until
        page.goto(f"{live_server.url}/statement/")
        assert page.get_by_text(total).first.is_visible()  # the charge is the quote's total
        assert page.get_by_text("Extension: 2 × L4 for 1 day").is_visible()
        screenshot(page, "statement-after-extension")
        page.goto(f"{live_server.url}/allocations/{allocation.pk}/")
        assert LedgerEntry.objects.filter(allocation=allocation).count() == 2

        poll_nodes([allocation.node_id])
        page.reload()
        before = _wait_for_points(page, more_than=0)
        time.sleep(1.1)  # a new poll needs a later timestamp; the chart refetches on its timer
        poll_nodes([allocation.node_id])
        page.evaluate("window.dispatchEvent(new Event('anchorgpu:refresh'))")
        _wait_for_points(page, more_than=before)
        assert GpuSample.objects.filter(gpu__held__allocation=allocation).count() >= 4
        screenshot(page, "allocation-detail")
        assert page.errors == []
        assert axe_serious(page) == []
    finally:
        simulator.stop()


def test_a_polish_customer_pages_the_statement_and_reads_notices(catalog, alice, page, live_server):
    from tests.support.booking import book

    account_preferences_set(user=alice, language="pl", time_zone="Europe/Warsaw")
    for _ in range(3):
        book(alice, model="h100", count=1, period="week")
    allocation = Allocation.objects.first()
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            team=allocation.team, user=alice, allocation=allocation, period=allocation.period,
            kind="charge",
            amount=Decimal("1.00"), net=Decimal("1.00"), vat=0, currency="USD",
            quote=allocation.quote, reason="extension", period_count=1,
            at=allocation.paid_from - timedelta(minutes=n),
        )
        for n in range(60)
    )  # fmt: skip
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/statement/")
    assert page.get_by_role("heading", name="Wyciąg").is_visible()
    assert page.get_by_text("Rezerwacja: 1 × H100 SXM na 1 tydzień").first.is_visible()
    page.get_by_role("link", name="Starsze →").click()
    page.wait_for_url(re.compile(r"older="))
    assert page.get_by_text("Przedłużenie: 1 × H100 SXM na 1 tydzień").first.is_visible()
    assert page.locator("time[title$='UTC']").first.is_visible()
    screenshot(page, "statement-paged-pl")
    assert axe_serious(page) == []

    page.goto(f"{live_server.url}/notices/")
    assert page.get_by_text("Rezerwacja potwierdzona").first.is_visible()
    assert page.get_by_text("Pobrano (brutto):").first.is_visible()
    assert page.get_by_text("VAT 23 %:").first.is_visible()
    screenshot(page, "notices-pl")
    assert page.errors == []
    assert axe_serious(page) == []


def test_double_clicked_book_makes_one_booking(catalog, alice, page, live_server):
    login(page, live_server, "alice", "pw-alice-123456")
    get_quote(page, live_server)
    page.get_by_role("button", name="Book").dblclick()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    page.go_back()
    page.get_by_role("button", name="Book").click()  # a resubmitted form, same key
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    assert Allocation.objects.count() == 1
    assert LedgerEntry.objects.count() == 1


def test_no_capacity_offers_the_earliest_start(catalog, alice, page, live_server):
    login(page, live_server, "alice", "pw-alice-123456")
    get_quote(page, live_server, gpus="4")
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/allocations/"))
    get_quote_attempt = page.goto(f"{live_server.url}/book/l4/")
    assert get_quote_attempt.ok
    page.get_by_label("GPUs").fill("1")
    page.get_by_role("button", name="Get a quote").click()
    expect(page.get_by_text("Not enough free L4 GPUs for that period.")).to_be_visible()
    assert page.get_by_text("The earliest start that fits is").is_visible()
    screenshot(page, "no-capacity")
    page.get_by_role("button", name="Quote for that start").click()
    page.wait_for_url(re.compile(r"/quotes/"))
    assert page.get_by_text("Paid period:").is_visible()


def test_staff_open_the_usage_dashboard(catalog, staff, alice, page, live_server):
    from tests.support.booking import book

    book(alice, model="h100", count=2)
    login(page, live_server, "staff", "pw-staff-123456")
    page.goto(live_server.url + "/usage/")
    assert page.get_by_role("heading", name="Fleet usage").is_visible()
    assert page.get_by_text("allocated now").is_visible()
    screenshot(page, "usage")
    assert page.errors == []
    assert axe_serious(page) == []
    csv = page.request.get(live_server.url + "/usage/?csv=booked_ahead")
    assert csv.ok and csv.text().startswith("model,day,gpu_days")


def test_eight_gpus_see_the_calendar_and_book_from_the_earliest_start(
    catalog, alice, bob, page, live_server
):
    from tests.support.booking import book

    for _ in range(2):
        book(bob, model="h100", count=8, period="day")  # both 8-GPU nodes are busy today
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/book/h100/")
    availability = page.locator("#availability")
    availability.get_by_label("Count on one node").fill("8")
    availability.get_by_role("button", name="Check").click()
    page.wait_for_url(re.compile(r"gpu_count=8"))
    assert page.get_by_text("8 GPUs on one node fit from").is_visible()
    assert page.locator("table.calendar td").count() >= 90
    screenshot(page, "availability")
    assert axe_serious(page) == []
    page.locator("#start-then").click()
    page.wait_for_url(re.compile(r"start=later"))
    page.get_by_role("button", name="Get a quote").click()
    page.wait_for_url(re.compile(r"/quotes/"))
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    mine = Allocation.objects.get(user=alice)
    assert (mine.gpu_count, mine.state) == (8, "scheduled")

    # then two whole nodes on one fabric, from the first window where both are free
    page.goto(f"{live_server.url}/book/h100/")
    availability = page.locator("#availability")
    availability.get_by_label("Or a cluster").select_option("nodes")
    availability.get_by_label("Whole nodes").fill("2")
    availability.get_by_role("button", name="Check").click()
    page.wait_for_url(re.compile(r"shape=nodes"))
    assert page.get_by_text("2 whole nodes on one fabric fit from").is_visible()
    page.locator("#start-then").click()
    page.wait_for_url(re.compile(r"node_count=2"))
    assert page.get_by_label("A cluster: whole nodes on one fabric").is_checked()
    # the fields the choices ask for show, the others hide
    assert (
        page.locator("#id_starts_at").is_visible() and page.locator("#id_node_count").is_visible()
    )
    assert not page.locator("#id_gpu_count").is_visible()
    page.get_by_label("Now", exact=True).check()
    expect(page.locator("#id_starts_at")).to_be_hidden()
    page.get_by_label("At a date and time").check()
    screenshot(page, "cluster-booking-form")
    page.get_by_role("button", name="Get a quote").click()
    page.wait_for_url(re.compile(r"/quotes/"))
    assert page.get_by_text("A cluster of 2 whole H100 SXM nodes").is_visible()
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/clusters/[0-9a-f-]+/$"))
    assert page.get_by_role("heading", name="Cluster of 2 × H100 SXM nodes").is_visible()
    assert page.locator("#cluster-nodes tbody tr").count() == 2
    assert page.get_by_text("InfiniBand NDR 400 Gb/s × 8").is_visible()
    screenshot(page, "cluster")
    assert axe_serious(page) == []
    cluster = Allocation.objects.filter(user=alice).exclude(cluster=None)
    assert cluster.count() == 2 and len({a.node_id for a in cluster}) == 2
    assert {a.paid_from for a in cluster} == {mine.paid_until}  # the first window both fit
    page.goto(f"{live_server.url}/allocations/")
    assert page.get_by_role("link", name="cluster", exact=True).count() == 2
    assert page.errors == []


def test_the_booking_form_prices_as_it_is_filled_and_the_quote_agrees(
    catalog, alice, page, live_server
):
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/book/l4/")
    form = page.locator("#book-form")
    total = page.locator("#estimate-total")
    expect(total).to_have_text("16.24 USD")  # the defaults: 1 GPU for 1 day, 13.20 + VAT
    expect(page.locator("#estimate-note")).to_contain_text("fixes the price for 15 minutes")

    form.get_by_label("GPUs").fill("2")
    expect(total).to_have_text("32.47 USD")  # 26.40 + VAT
    form.get_by_label("Number of periods").fill("2")
    expect(total).to_have_text("64.94 USD")  # 52.80 + VAT
    form.get_by_label("NVMe scratch (TB)").fill("1")
    expect(total).to_have_text("74.78 USD")  # 2×13.20×2 + 4.00×2 = 60.80, + 23 % VAT
    form.get_by_label("Custom image").check()  # on or off: a checkbox
    expect(page.locator("#estimate-lines")).to_contain_text("Custom image: 1 setup (one-time)")
    expect(total).to_have_text("259.28 USD")  # 210.80 + VAT
    form.get_by_label("Region").select_option("pl-waw")
    expect(page.locator("#estimate")).to_contain_text("In Warsaw only.")
    screenshot(page, "book-estimate")
    assert axe_serious(page) == []

    form.get_by_label("GPUs").fill("5")  # the L4 node has 4
    expect(page.locator("#estimate-errors")).to_contain_text("At most 4 GPUs of this model")
    assert form.get_by_label("GPUs").get_attribute("max") == "4"
    form.get_by_label("GPUs").fill("2")
    expect(total).to_have_text("259.28 USD")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "book-estimate-phone")

    page.get_by_role("button", name="Get a quote").click()
    page.wait_for_url(re.compile(r"/quotes/"))
    assert page.locator("#quote-total").inner_text() == "259.28 USD"  # the estimate's total
    assert page.locator("#quote-region").inner_text().startswith("Region: Warsaw")
    assert page.errors == []


def test_a_polish_customer_on_a_phone_sees_the_estimate_in_polish(
    catalog, alice, browser, live_server
):
    account_preferences_set(user=alice, language="pl", time_zone="Europe/Warsaw")
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US")
    page = context.new_page()
    try:
        login(page, live_server, "alice", "pw-alice-123456")
        page.goto(f"{live_server.url}/book/h100/")
        expect(page.locator("#estimate-h")).to_have_text("Szacunek")
        expect(page.locator("#estimate-total")).to_have_text("70,85 USD")  # 57,60 + VAT
        page.locator("#id_gpu_count").fill("3")
        expect(page.locator("#estimate-total")).to_have_text("212,54 USD")
        expect(page.locator("#estimate-note")).to_contain_text("ustala cenę na 15 minut.")
        page.locator("#id_gpu_count").fill("9")
        expect(page.locator("#estimate-errors")).to_contain_text("najwyżej 8 GPU tego modelu")
        page.locator("#id_gpu_count").fill("3")
        expect(page.locator("#estimate-total")).to_have_text("212,54 USD")
        expect(page.locator("#calendar-legend")).to_contain_text("Wolne GPU na jednym węźle")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the booking page is {width} px wide on a 390 px phone"
        screenshot(page, "book-estimate-pl-phone")
        # The form, its estimate and the calendar; the price history's table on a phone is
        # the stacked phone tables, which the every-page walk checks.
        assert [v for v in axe_serious(page) if "history-h" not in str(v[2])] == []
    finally:
        context.close()
