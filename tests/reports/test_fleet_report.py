from datetime import datetime, timedelta

import pytest
from django.utils import timezone, translation

from accounts.roles import acting_as
from catalog.models import Gpu, Node, NodeHealth
from rentals.models import AllocationGpu
from rentals.selectors.allocation_usage import allocation_usage, stopped_spans
from rentals.services import (
    allocation_cancel,
    allocation_start,
    allocation_stop,
    allocations_enforce,
)
from reports.selectors import (
    booked_ahead,
    fleet_over_time,
    fleet_report,
    fleet_report_cached,
    fleet_report_tables,
    step_for,
)
from reports.templatetags.fleet_report import heat_cells
from telemetry.models import Flag, FlagKind, FleetRollup, FleetSize, GpuSample, Severity
from telemetry.rollup import telemetry_rollup
from tests.support.booking import book, book_around_three_days

pytestmark = pytest.mark.django_db


def test_booked_gpu_days_ahead_counts_only_what_is_booked(catalog, alice):
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    book(alice, model="h100", count=2, period="day", periods=2, starts_at=now + timedelta(days=1))
    heat = {row["model"]["slug"]: row for row in fleet_report(now=now)["heatmap"]}
    assert [d["gpu_days"] for d in heat["h100"]["days"][:4]] == [0.0, 2.0, 2.0, 0.0]
    assert heat["h100"]["capacity"] == 20
    assert sum(d["gpu_days"] for d in heat["l4"]["days"]) == 0.0


def test_stopped_time_is_paid_time_in_the_usage_summary(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day")
    start = allocation.paid_from
    allocation_stop(acting=acting_as(alice), allocation=allocation, now=start + timedelta(hours=2))
    allocation_start(acting=acting_as(alice), allocation=allocation, now=start + timedelta(hours=5))
    allocation.refresh_from_db()
    summary = allocation_usage(allocation=allocation, now=start + timedelta(hours=6))
    assert (summary["paid_hours"], summary["stopped_hours"], summary["running_hours"]) == (
        6.0,
        3.0,
        3.0,
    )
    assert summary["hours_left"] == 18.0
    dashboard = fleet_report(now=start + timedelta(hours=6))
    assert dashboard["stopped_gpu_hours"] == 3.0


def test_stopped_time_ends_with_the_paid_period_when_expiry_runs_late(catalog, alice):
    """Enforcement expires a stopped allocation when it runs, after the paid period's end:
    the time between is neither paid nor stopped."""
    allocation = book(alice, model="l4", count=2, period="day")
    start, end = allocation.paid_from, allocation.paid_until
    allocation_stop(acting=acting_as(alice), allocation=allocation, now=start + timedelta(hours=2))
    allocations_enforce(now=end + timedelta(hours=3))  # the workers were down for three hours
    allocation.refresh_from_db()
    assert allocation.state == "expired"
    later = end + timedelta(hours=4)
    summary = allocation_usage(allocation=allocation, now=later)
    assert (summary["paid_hours"], summary["stopped_hours"], summary["running_hours"]) == (
        24.0,
        22.0,
        2.0,
    )
    assert fleet_report(now=later)["stopped_gpu_hours"] == 44.0  # 2 GPUs × 22 h


def test_booked_ahead_splits_a_holding_over_the_days_it_touches(catalog, alice):
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    six_pm = now + timedelta(days=2, hours=18)
    book(alice, model="h100", count=1, period="day", starts_at=six_pm)
    cancelled = book(alice, model="h100", count=3, period="day", starts_at=six_pm)
    allocation_cancel(acting=acting_as(alice), allocation=cancelled, now=now)
    heat = {row["model"]["slug"]: row for row in fleet_report(now=now)["heatmap"]}
    days = heat["h100"]["days"]
    assert len(days) == 30 and days[0]["day"] == now.date()
    assert [d["gpu_days"] for d in days[1:5]] == [0.0, 0.2, 0.8, 0.0]  # 6 h, then 18 h
    assert days[3]["pct"] == pytest.approx(0.8 / 20 * 100)


@pytest.mark.parametrize("read_after", [timedelta(0), timedelta(days=2, hours=13)])
def test_booked_ahead_is_each_days_overlap_with_the_live_holdings(catalog, alice, read_after):
    """The database's step function against every live holding's overlap with each day in
    Python: holdings of several GPUs and models, a part day at either end, one that started
    before the first day (read two days later), one that runs past the 30th, one released."""
    base = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    book(alice, model="h100", count=2, period="week", starts_at=base + timedelta(hours=5))
    book(alice, model="h100", count=1, period="month", starts_at=base + timedelta(hours=31.5))
    book(alice, model="h100", count=3, period="day", starts_at=base + timedelta(hours=90))
    book(alice, model="l4", count=1, period="day", periods=3, starts_at=base + timedelta(days=27))
    cancelled = book(alice, model="l4", count=2, period="week", starts_at=base)
    allocation_cancel(acting=acting_as(alice), allocation=cancelled)
    now = base + read_after
    rows = {row["model"]["slug"]: row for row in booked_ahead(now=now)}
    day0 = now.replace(hour=0)
    holdings = AllocationGpu.objects.filter(released=False).select_related("allocation__gpu_model")
    for slug, row in rows.items():
        assert [cell["day"] for cell in row["days"]] == [
            (day0 + timedelta(days=i)).date() for i in range(30)
        ]
        for i, cell in enumerate(row["days"]):
            day = day0 + timedelta(days=i)
            seconds = sum(
                max(
                    (
                        min(g.ends_at, day + timedelta(days=1)) - max(g.starts_at, day)
                    ).total_seconds(),
                    0,
                )
                for g in holdings
                if g.allocation.gpu_model.slug == slug
            )
            assert cell["gpu_days"] == round(seconds / 86400, 1), (slug, i)
    assert sum(cell["gpu_days"] for cell in rows["h100"]["days"]) > 0
    assert sum(cell["gpu_days"] for cell in rows["l4"]["days"]) > 0


@pytest.mark.parametrize("days", [2, 30])
def test_allocated_per_step_counts_the_holdings_that_overlap_each_step(catalog, alice, days):
    """Hourly and daily steps: the GPUs held at some time in each step, from its start
    (truncated) to the live one, against a count of every holding in Python. The range
    ends three days ahead, so holdings booked now lie on both sides of its steps."""
    base = book_around_three_days(alice)
    end = base + timedelta(days=3)
    step = step_for(days)
    points = fleet_over_time(start=end - timedelta(days=days), end=end, step=step)
    holdings = list(AllocationGpu.objects.filter(released=False))
    assert holdings and len(points) == days * (24 if step == timedelta(hours=1) else 1) + 1
    for point in points:
        h = datetime.fromisoformat(point["t"])
        expected = sum(1 for g in holdings if g.starts_at < h + step and g.ends_at > h)
        assert point["allocated"] == expected, point
    assert points[-1]["allocated"] == 2  # the week from +50 h and the day from +71.5 h


def test_the_dashboard_is_computed_once_a_minute(catalog, alice, django_assert_num_queries):
    at = timezone.now().replace(second=5)
    first = fleet_report_cached(days=7, now=at)
    book(alice, model="h100", count=2, period="day")
    with django_assert_num_queries(0):
        same = fleet_report_cached(days=7, now=at + timedelta(seconds=50))
    assert same["allocated_now"] == first["allocated_now"] and same["now"] == at
    later = fleet_report_cached(days=7, now=at + timedelta(minutes=1))
    assert later["allocated_now"] == first["allocated_now"] + 2


def test_the_dashboard_page_says_when_its_figures_were_computed(catalog, client, django_user_model):
    client.force_login(django_user_model.objects.create_user("boss", is_staff=True))
    page = client.get("/usage/").content.decode()
    assert "Figures as of <time" in page


def test_heatmap_cells_show_gpu_days_in_the_page_language():
    days = [
        {"gpu_days": 0.2, "shade": 1},
        {"gpu_days": 2.5, "shade": 12},
        {"gpu_days": 0.0, "shade": 0},
        {"gpu_days": 1 / 24, "shade": 0},
    ]
    with translation.override("en"):
        cells = heat_cells(days)
    assert cells.count("<td") == 4
    assert 'title="0 GPU-days">0</td>' in cells and "&lt;0.1 GPU-days" in cells
    assert 'color-mix(in srgb, #0f3d5e 12%, white)" title="2.5 GPU-days">2.5</td>' in cells
    assert 'title="0.2 GPU-days">0.2</td>' in cells  # a part of a day never reads 0
    with translation.override("pl"):
        assert 'title="2,5 GPU-dni">2,5</td>' in heat_cells(days)
        assert ">&lt;0,1</td>" in heat_cells(days)


def test_stopped_gpu_hours_are_the_stopped_spans_within_the_range(catalog, alice):
    """The database's sum against `stopped_spans` in Python: a stop that ended, one still
    open, one before the range, stops clipped by the range's start (one left within the
    range, one never left), and an allocation expired while stopped (its paid period ended
    within the week, before the day)."""
    acting = acting_as(alice)
    closed = book(alice, model="l4", count=2, period="week")
    at = closed.paid_from
    allocation_stop(acting=acting, allocation=closed, now=at + timedelta(hours=1))
    allocation_start(acting=acting, allocation=closed, now=at + timedelta(hours=30))
    allocation_stop(acting=acting, allocation=closed, now=at + timedelta(hours=40))
    open_ = book(alice, model="h100", count=1, period="week")
    allocation_stop(acting=acting, allocation=open_, now=at + timedelta(hours=45))
    still = book(alice, model="l4", count=1, period="week")
    allocation_stop(acting=acting, allocation=still, now=at + timedelta(hours=10))
    running = book(alice, model="h100", count=3, period="day")
    expired = book(alice, model="l4", count=1, period="day")
    allocation_stop(acting=acting, allocation=expired, now=at + timedelta(hours=3))
    allocations_enforce(now=at + timedelta(hours=25))
    expired.refresh_from_db()
    assert expired.state == "expired"
    now = at + timedelta(hours=50)
    for days in (1, 7):
        start = now - timedelta(days=days)
        expected = 0.0
        for allocation in (closed, open_, still, running, expired):
            allocation.refresh_from_db()
            for a, b in stopped_spans(allocation=allocation, now=now):
                overlap = (min(b, now) - max(a, start)).total_seconds()
                expected += max(0, overlap) / 3600 * allocation.gpu_count
        assert expected > 0
        got = fleet_report(days=days, now=now)["stopped_gpu_hours"]
        assert got == round(expected, 1), days


def test_the_dashboard_lists_what_needs_a_look(catalog, alice, staff, client):
    """Troubled nodes, open flags, expiring and idle allocations: on the page, in their
    labels' language, and in the CSV downloads."""
    Node.objects.update(health=NodeHealth.HEALTHY)
    node = Node.objects.order_by("hostname").first()
    Node.objects.filter(pk=node.pk).update(
        health=NodeHealth.UNREACHABLE, health_detail="connection refused"
    )
    now = timezone.now()
    gpu = node.gpus.order_by("index").last()
    Flag.objects.create(
        node=node, gpu=gpu, kind=FlagKind.XID, severity=Severity.CRITICAL, detail="XID 79",
        opened_at=now, last_seen_at=now,
    )  # fmt: skip
    idle = book(alice, model="l4", count=1, period="day")
    busy = book(alice, model="h100", count=1, period="day")
    later = idle.paid_from + timedelta(hours=3)
    GpuSample.objects.create(
        gpu=busy.held.get().gpu, at=later - timedelta(minutes=5), utilization=80
    )
    telemetry_rollup(now=later)  # idle is judged on the minute rollups

    dashboard = fleet_report(now=later)
    assert [a["id"] for a in dashboard["idle_allocations"]] == [idle.pk]
    assert {a["id"] for a in dashboard["expiring"]} == {idle.pk, busy.pk}
    assert [n["hostname"] for n in dashboard["troubled"]] == [node.hostname]
    assert dashboard["troubled_count"] == 1
    tables = fleet_report_tables(dashboard)
    assert tables["idle"][1] == [
        (idle.pk, "alice", idle.gpu_model.name, idle.node.hostname, idle.paid_until.isoformat())
    ]
    assert tables["nodes"][1][0][:5] == (
        node.hostname, node.region.name, node.gpu_model.name, "unreachable", "connection refused"
    )  # fmt: skip
    assert tables["flags"][1][0][:5] == (node.hostname, gpu.index, "xid", "critical", "XID 79")

    client.force_login(staff)
    for language in ("en", "pl"):
        with translation.override(language):
            labels = [str(NodeHealth.UNREACHABLE.label), str(FlagKind.XID.label)]
        page = client.get("/usage/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
        for text in (*labels, f"{node.hostname} #{gpu.index}", "connection refused"):
            assert text in page, (language, text)
        assert f"/allocations/{busy.pk}/" in page  # expiring within 48 hours
    csv = b"".join(client.get("/usage/?csv=flags").streaming_content).decode()
    assert f"{node.hostname},{gpu.index},xid,critical,XID 79" in csv


def test_busy_is_shown_against_the_gpus_whose_telemetry_answered(catalog, staff, client):
    """Two GPUs of the fleet answered in the newest minute rolled up, one of them busy: the
    page says busy is of those two, not of the fleet, and which minute it is; each step
    over time carries the fewest GPUs that answered a round of it, as the polling rounds
    recorded them."""
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    gpus = list(Gpu.objects.order_by("pk")[:2])
    for gpu, utilization in zip(gpus, (90, 0), strict=True):
        GpuSample.objects.create(
            gpu=gpu, at=minute + timedelta(seconds=30), utilization=utilization
        )
    telemetry_rollup(now=now)
    hour = now.replace(minute=0, second=0, microsecond=0)
    FleetSize.objects.create(at=hour - timedelta(hours=2), gpus=32, reporting=30)
    FleetSize.objects.create(at=hour, gpus=32, reporting=2)

    dashboard = fleet_report(days=1, now=now)
    assert (dashboard["total"], dashboard["busy_now"], dashboard["reporting_now"]) == (32, 1, 2)
    assert dashboard["busy_until"] == minute + timedelta(minutes=1)
    assert dashboard["latest_step_open"] and dashboard["step_is_hour"]
    if minute >= now.replace(minute=0, second=0, microsecond=0):  # in the hour not closed
        assert dashboard["latest_step_until"] == minute + timedelta(minutes=1)
    client.force_login(staff)
    page = client.get("/usage/?days=1").content.decode()
    for part in ('id="latest-step"', 'id="idle-window"', "the newest rolled up"):
        assert part in page
    points = {p["t"]: p for p in dashboard["over_time"]}
    assert points[(hour - timedelta(hours=2)).isoformat()]["reporting"] == 30
    assert points[hour.isoformat()] | {"total": 32, "reporting": 2} == points[hour.isoformat()]
    assert points[(hour - timedelta(hours=1)).isoformat()]["reporting"] is None  # no record
    header, rows = fleet_report_tables(dashboard)["over_time"]
    assert header[:3] == ["hour_utc", "total", "reporting"] and rows[-1][:3] == (
        hour.isoformat(),
        32,
        2,
    )

    client.force_login(staff)
    page = client.get("/usage/?days=1", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "of 2 GPUs answering telemetry" in page
    api = client.get("/api/v1/usage/fleet/?step=hour").json()
    assert api[-1]["reporting"] == 2


def test_the_fleet_chart_has_a_gap_before_the_fleet_was_first_recorded(catalog, alice):
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    FleetSize.objects.create(at=hour - timedelta(hours=5), gpus=16, reporting=16)
    points = fleet_over_time(start=hour - timedelta(hours=10), end=hour, step=timedelta(hours=1))
    before = [p for p in points if datetime.fromisoformat(p["t"]) < hour - timedelta(hours=5)]
    assert before and all(p["allocated"] is None and p["busy"] is None for p in before)
    since = [p for p in points if datetime.fromisoformat(p["t"]) >= hour - timedelta(hours=5)]
    assert since[0]["total"] == 16 and all(p["allocated"] == 0 for p in since)


def test_the_node_health_csv_lists_every_node_healthy_too(catalog, client, staff):
    Node.objects.update(health=NodeHealth.HEALTHY)
    client.force_login(staff)
    rows = b"".join(client.get("/usage/?csv=nodes").streaming_content).decode().splitlines()
    assert rows[0].startswith("hostname,region,model,health")
    assert len(rows) - 1 == Node.objects.count() and all(",healthy," in r for r in rows[1:])


def test_the_page_reads_telemetry_from_the_fleet_rollups_and_says_what_they_cover(
    catalog, staff, client
):
    """The staff page's use by model and region reads no raw samples of the whole fleet: it
    sums the rolled-up whole hours and names their span; a raw sample after the rollups does
    not change it. (The chart's newest steps stay live.)"""
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    node = Node.objects.select_related("gpu_model", "region").first()
    rolled = hour - timedelta(hours=2)
    FleetRollup.objects.create(
        bucket="hour", at=rolled, gpu_model=node.gpu_model, region=node.region, gpus=4,
        busy_gpus=3, samples=480, util_sum=480 * 60.0, util_samples=480, covered_s=4 * 3600.0,
        busy_s=3 * 3600.0, energy_j=None,
    )  # fmt: skip
    GpuSample.objects.create(gpu=node.gpus.first(), at=now - timedelta(seconds=30), utilization=5)

    dashboard = fleet_report(days=1, now=now)

    start = now - timedelta(days=1)
    first_whole = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    assert (dashboard["use_from"], dashboard["use_until"]) == (
        first_whole,
        rolled + timedelta(hours=1),
    )
    assert dashboard["by_model"] == [{"name": node.gpu_model.name, "util": 60.0, "hours": 4.0}]
    points = {p["t"]: p for p in dashboard["over_time"]}
    assert points[rolled.isoformat()]["busy"] == 3

    client.force_login(staff)
    page = client.get("/usage/?days=1", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "the whole hours rolled up so far" in page


def test_with_nothing_rolled_up_the_page_says_so(catalog, staff, client):
    client.force_login(staff)
    page = client.get("/usage/?days=7", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "no hour of this range is rolled up yet" in page


@pytest.mark.parametrize("days", [7, 90])
def test_booked_ahead_and_steps_match_a_count_in_python_across_model_windows(catalog, alice, days):
    """Several allocations of one model with the same window are counted once per GPU, each
    with its own GPUs (the grouping BOOKED_AHEAD does before spreading them over days)."""
    now = timezone.now()
    for count in (1, 2, 3):
        book(alice, model="h100", count=count, period="day")
    heat = {row["model"]["slug"]: row for row in fleet_report(days=days, now=now)["heatmap"]}
    day0 = now.replace(hour=0, minute=0, second=0, microsecond=0)
    expected = {}
    for held in AllocationGpu.objects.filter(released=False, allocation__isnull=False):
        for i in range(30):
            d = day0 + timedelta(days=i)
            overlap = min(held.ends_at, d + timedelta(days=1)) - max(held.starts_at, d)
            if overlap > timedelta(0):
                key = (held.allocation.gpu_model.slug, d.date())
                expected[key] = expected.get(key, 0) + overlap.total_seconds() / 86400
    got = {(slug, c["day"]): c["gpu_days"] for slug, row in heat.items() for c in row["days"]}
    assert {k: round(v, 1) for k, v in expected.items()} == {k: got[k] for k in expected}
    assert all(v == 0 for k, v in got.items() if k not in expected)


def test_the_fleet_report_page_is_for_staff_only(catalog, alice, staff, client):
    refused = client.get("/usage/")  # a visitor signs in on our page, not the admin's
    assert refused.status_code == 302 and refused["Location"].startswith("/account/login/")
    client.force_login(alice)
    page = client.get("/usage/")
    assert page.status_code == 403 and "This page is for AnchorGPU staff" in page.content.decode()
    client.force_login(staff)
    assert client.get("/usage/?days=30").status_code == 200
    csv = b"".join(client.get("/usage/?csv=by_model").streaming_content).decode()
    assert csv.startswith("model,avg_utilisation_pct,gpu_hours")
