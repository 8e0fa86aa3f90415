"""Server time of the staff dashboard with 90 days of telemetry for 100 nodes × 8 GPUs,
answered by a real gunicorn: uncached (what the first view in a minute costs) and within
the minute. Django's test client is timed too, for comparison: it copies every template's
context for its assertions, which no server does."""

import statistics
import time

import httpx
import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from catalog.demo import seed_catalog
from telemetry.models import FleetRollup, GpuHour
from telemetry.rollup import telemetry_rollup
from tests.perf.conftest import gunicorn, h100_fleet, report, target
from tests.support.booking import book

pytestmark = pytest.mark.django_db(transaction=True)

FILL = """
INSERT INTO telemetry_gpuhour (gpu_id, at, samples, util_sum, util_samples, util_max,
    mem_max_mib, mem_total_mib, power_sum, power_samples, temp_max_c, energy_j, covered_s, busy_s)
SELECT g.id, h, 240, 240 * ((g.id * 7 + extract(hour FROM h))::int % 100), 240, 100, 40000,
       81559, 350 * 240, 240, 70, 1.2e6, 3600, 0
FROM catalog_gpu g
CROSS JOIN generate_series(date_trunc('hour', now()) - interval '90 days',
                           date_trunc('hour', now()) - interval '1 hour', interval '1 hour') AS h
WHERE g.node_id IN (SELECT id FROM catalog_node WHERE hostname LIKE 'dash-%')
"""

# What the polling rounds of 90 days leave (`fleet_size_record`: one row per hour).
SIZES = """
INSERT INTO telemetry_fleetsize (at, gpus, reporting)
SELECT h, 800, 800
FROM generate_series(date_trunc('hour', now()) - interval '90 days', date_trunc('hour', now()),
                     interval '1 hour') AS h
"""


def timed(client, url, runs=5, uncached=False):
    times = []
    for _ in range(runs):
        if uncached:
            cache.clear()
        started = time.perf_counter()
        response = client.get(url)
        assert response.status_code == 200, response
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": statistics.median(times), "max_ms": max(times)}


def test_dashboard_server_time(client, django_user_model):
    seed_catalog()
    h100_fleet("dash", 100, spread_regions=True)
    with connection.cursor() as cursor:
        cursor.execute(FILL)
        cursor.execute(SIZES)
    days = telemetry_rollup()["day"]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE telemetry_gpuhour, telemetry_gpuday")
    rows = GpuHour.objects.count()
    fleet = FleetRollup.objects.count()
    customer = django_user_model.objects.create_user("busy")
    for _ in range(50):
        book(customer, model="h100-sxm", count=4, period="week")
    staff = django_user_model.objects.create_user("boss", is_staff=True)
    client.force_login(staff)

    test_client = timed(client, "/usage/?days=90", uncached=True)
    session = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    with (
        gunicorn(workers=1, threads=1, pages=True) as url,
        httpx.Client(base_url=url, cookies=session) as http,
    ):
        timed(http, "/usage/?days=90", runs=2, uncached=True)  # the worker's first requests
        health = timed(http, "/healthz")
        week = timed(http, "/usage/?days=7", uncached=True)
        quarter = timed(http, "/usage/?days=90", runs=9, uncached=True)
        cached = timed(http, "/usage/?days=90")
    for figures in (week, quarter, cached, test_client):
        figures["ratio_to_healthz"] = figures["median_ms"] / health["median_ms"]
    report(
        f"staff dashboard, {rows} hourly + {days} daily GPU rollup rows "
        f"(100 nodes × 8 GPUs × 90 days) and {fleet} fleet rollup rows, 50 allocations",
        {
            "/healthz": health,
            "/usage/?days=7 uncached": week,
            "/usage/?days=90 uncached": quarter,
            "/usage/?days=90 within the minute (cached)": cached,
            "/usage/?days=90 uncached, Django's test client": test_client,
        },
    )
    target("dashboard_90_days_median_ms", quarter["median_ms"], at_most=40, unit=" ms")
