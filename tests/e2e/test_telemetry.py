"""Staff open a new demo's dashboard and find it populated, acknowledge a flag; a customer
reads a whole rental's charts and figures."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounts.services.profile import account_preferences_set
from catalog.demo import seed_catalog, seed_users
from catalog.models import Gpu, Node
from rentals.demo import seed_rentals
from rentals.models import Allocation, AllocationState
from reports.demo import seed_history
from telemetry.models import Flag, FlagKind, Severity
from tests.e2e.conftest import axe_serious, login, screenshot, shared_world
from tests.support.booking import book

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-demo-123456"


@pytest.fixture
def demo(glossary, worlds):
    """The demo as `make run` seeds it, built once per test process (`shared_world`)."""
    return shared_world(worlds, "demo", _demo_build)


def _demo_build():
    seed_catalog()
    seed_users(password=PASSWORD)
    seed_rentals()
    seed_history()


def test_staff_find_a_new_demo_populated_and_acknowledge_a_flag(demo, page, live_server):
    node = Node.objects.order_by("hostname").first()
    now = timezone.now()
    Flag.objects.create(
        node=node, gpu=node.gpus.first(), kind=FlagKind.XID, severity=Severity.CRITICAL,
        detail="XID 79", opened_at=now - timedelta(minutes=5), last_seen_at=now,
    )  # fmt: skip
    login(page, live_server, "staff", PASSWORD)
    page.goto(f"{live_server.url}/usage/?days=30")
    points = json.loads(page.locator("#fleet-data").text_content())
    assert len(points) == 31 and sum(1 for p in points if p["busy"]) >= 25
    fleet = Gpu.objects.count()  # the demo fleet: 112 GPUs
    assert all(p["total"] == fleet == 112 for p in points[:-1])  # recorded history
    assert page.get_by_role("cell", name="NVIDIA H200 SXM").first.is_visible()
    assert not page.get_by_text("No data in this range.").first.is_visible()
    screenshot(page, "dashboard-demo")
    assert page.errors == []
    assert axe_serious(page) == []

    page.get_by_role("link", name="All flags").click()
    page.wait_for_url(re.compile(r"/flags/$"))
    page.get_by_label("Note").fill("reseated the card")
    page.get_by_role("button", name="Acknowledge").click()
    page.wait_for_url(re.compile(r"/flags/$"))
    assert page.get_by_text("Acknowledged.").is_visible()
    history = page.locator("#flag-history").locator("..")
    assert history.get_by_text("staff: reseated the card").is_visible()
    screenshot(page, "flags")
    assert axe_serious(page) == []
    flag = Flag.objects.get()
    assert (flag.acknowledged_by.username, flag.closed_at is not None) == ("staff", True)


def test_a_customer_reads_a_whole_rental(demo, page, live_server):
    allocation = (
        Allocation.objects.filter(user__username="alice", state=AllocationState.EXPIRED)
        .order_by("paid_from")
        .first()
    )
    login(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/allocations/{allocation.pk}/")
    page.get_by_label("Range").select_option("rental")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(re.compile(r"range=rental"))
    deadline = 100
    while int(page.locator("#charts").get_attribute("data-points") or 0) == 0 and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    hours = (allocation.paid_until - allocation.paid_from) / timedelta(hours=1)
    assert int(page.locator("#charts").get_attribute("data-points")) >= hours * allocation.gpu_count
    assert page.get_by_text("The whole rental so far").is_visible()
    assert not page.locator("#summary-partial").count()
    screenshot(page, "allocation-whole-rental")
    assert page.errors == []
    assert axe_serious(page) == []

    page.get_by_label("Range").select_option("custom")
    page.locator("#id_start").fill("2026-01-02T10:00")
    page.locator("#id_end").fill("2026-01-01T10:00")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_text("The start must be before the end.")).to_be_visible()


def test_chart_times_are_in_the_readers_zone_and_language(catalog, staff, page, live_server):
    account_preferences_set(user=staff, language="pl", time_zone="Asia/Kolkata")
    staff.set_password(PASSWORD)
    staff.save()
    allocation = book(staff, model="l4", count=2, period="day")
    login(page, live_server, "staff", PASSWORD)
    ten_utc = "Date.parse('2026-01-01T10:00:00Z')"

    page.goto(f"{live_server.url}/allocations/{allocation.pk}/")
    assert page.get_by_text("Czas na wykresach podano w strefie Asia/Kolkata.").is_visible()
    # the charts' first refresh has drawn once it sets data-points (Playwright's expect
    # polls from its own script: the page's CSP refuses the string eval that
    # page.wait_for_function needs, so that failed whenever the first check was too early)
    expect(page.locator("#charts")).to_have_attribute("data-points", "0")
    util = "Chart.getChart('chart-util')"
    assert page.evaluate(f"{util}.data.datasets.map((d) => d.label)") == ["GPU 0", "GPU 1"]
    assert page.evaluate("Chart.getChart('chart-mem').data.datasets.at(-1).label") == "łącznie"
    assert page.evaluate(f"{util}.options.scales.x.ticks.callback({ten_utc})") == "15:30"
    # no samples yet: the axis still spans the range the telemetry answered for (the hour
    # asked for, clipped to the rental), and no figure is made up
    # (the charts refresh every 15 s, each time to a later end: only the start is fixed)
    answered = page.evaluate(
        "fetch(document.getElementById('charts').dataset.url).then((r) => r.json())"
        ".then((d) => Date.parse(d.from))"
    )
    axis = page.evaluate(f"[{util}.scales.x.min, {util}.scales.x.max]")
    assert axis[0] == answered == int(allocation.paid_from.timestamp() * 1000) < axis[1], (
        axis,
        answered,
    )
    peak = page.locator(".kpi", has_text="szczytowa pamięć").locator(".value")
    assert peak.inner_text() == "—"
    screenshot(page, "allocation-pl-zone")
    assert page.errors == []

    page.goto(f"{live_server.url}/usage/?days=1")
    assert page.get_by_text("Czas na wykresie podano w strefie Asia/Kolkata.").is_visible()
    fleet = "Chart.getChart('fleet-chart')"
    labels = page.evaluate(f"{fleet}.data.datasets.map((d) => d.label)")
    assert labels == ["we flocie", "z działającą telemetrią", "przydzielone", "zajęte"]
    tick = page.evaluate(f"{fleet}.options.scales.x.ticks.callback({ten_utc})")
    assert "sty" in tick and "15:30" in tick, tick
    # ticks at whole hours of the reader's clock: Kolkata is 5:30 ahead of UTC
    ticks = page.evaluate(f"{fleet}.scales.x.ticks.map((t) => t.value)")
    assert len(ticks) >= 4 and all((t + 19_800_000) % 10_800_000 == 0 for t in ticks), ticks
    assert page.get_by_text("nieznany: 5").is_visible()  # node health, named in Polish
    screenshot(page, "dashboard-pl-zone")
    assert page.errors == []
