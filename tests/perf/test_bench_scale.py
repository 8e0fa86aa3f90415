"""A year of business at 1k and 10k GPUs (and 100k with BENCH_SCALE_GPUS=100000): what
customers, staff and workers wait for, and how it grows.

Each size is generated afresh (`anchorgpu.scale.generate_scale`, the same as
`manage.py generate_scale`), then every figure is timed: pages, other GETs, quotes and
bookings as a real gunicorn answers them, everything else in this process (`_Viewer`). A
request's peak is the Python memory tracemalloc saw while the test client made it in this
process, with templates rendered as a server renders them (`templates_as_served`), on a
separate pass so the timings run without it. Growth ratios compare the two largest sizes run, measured in
this one run: the machine is shared, so absolute figures are noisy and the ratios are what
to read.

BENCH_SCALE_GPUS: a size to add (e.g. 100000) or a comma list that replaces 1000,10000;
BENCH_SCALE_DAYS (365), BENCH_SCALE_RUNS (5), BENCH_SCALE_HOURLY_DAYS (7).
"""

import json
import math
import os
import statistics
import time
import tracemalloc
import uuid
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection, transaction
from django.test import Client
from psycopg.sql import SQL, Literal

from accounts.roles import acting_as
from anchorgpu.scale import CUSTOMER, STAFF, generate_scale
from catalog.models import GpuModel
from core.db import db_now
from rentals.models import Allocation, AllocationState, CapacityNodeDays, CapacitySummary
from rentals.placement import place_cluster_locked, place_locked
from rentals.services import allocation_book, allocations_enforce, quote_create
from rentals.services.summary import capacity_summaries_refresh, capacity_summary_refresh
from reports.services import allocated_steps_close
from telemetry.models import GpuSample
from telemetry.rollup import telemetry_prune, telemetry_rollup
from tests.perf.conftest import gunicorn, report, target, templates_as_served

pytestmark = pytest.mark.django_db(transaction=True)


def _sizes():
    extra = os.environ.get("BENCH_SCALE_GPUS", "")
    if "," in extra:
        return sorted(int(s) for s in extra.split(",") if s)
    return sorted({1000, 10000, *([int(extra)] if extra else [])})


DAYS = int(os.environ.get("BENCH_SCALE_DAYS", "365"))
RUNS = int(os.environ.get("BENCH_SCALE_RUNS", "5"))
HOURLY_DAYS = int(os.environ.get("BENCH_SCALE_HOURLY_DAYS", "7"))

CUSTOMER_FIGURES = (
    "catalog", "availability", "availability_exact", "book_page", "book_page_exact", "quote", "booking", "allocation_page",
    "allocation_charts", "allocation_list", "allocation_list_last_page", "statement",
    "statement_last_page",
)  # fmt: skip
# The statement's CSV is a download, not a page: its yardsticks are the time to the first
# chunk, rows a second and peak memory (each held to growth ≤ 1.5×: the customer has the
# same rows at every fleet size), not a page's 50 ms for the whole body.
DOWNLOAD = {"first_chunk_ms": ("at_most", 50), "rows_per_s": ("at_least", 50_000),
            "peak_mib": ("at_most", 64)}  # fmt: skip
STAFF_FIGURES = (
    "dashboard_7d", "dashboard_90d", "flags", "nodes", "booked_ahead", "revenue", "metrics",
)  # fmt: skip
WORKER_FIGURES = (
    "enforcement", "hourly_rollup", "minute_rollup", "retention", "placement_1",
    "placement_1_exact", "placement_8_soon", "placement_8_soon_exact", "placement_8",
    "placement_cluster_4", "capacity_refresh", "capacity_refresh_incremental",
    "capacity_refresh_new_day", "booked_ahead_exact",
)  # fmt: skip
# Naturally per fleet (the issue): their growth may follow the fleet's, within a budget.
# The minute rollup must end well inside its minute (beat starts one every minute).
PER_FLEET = {"dashboard_7d": 150, "dashboard_90d": 150, "metrics": 1000,
             "hourly_rollup": 60_000, "minute_rollup": 15_000, "retention": 60_000}  # fmt: skip
# The capacity read model: its full refresh (a model's first, or after a day without a
# worker), the refresh a booking queues (the booked node's share, and the nodes time made due
# meanwhile) and the first of a UTC day (the days move on; the nodes at their end are read).
BUDGET = {"enforcement": 1000, "capacity_refresh": 150, "capacity_refresh_incremental": 150,
          "capacity_refresh_new_day": 150}  # fmt: skip
# The degraded mode: the capacity read model missing (no worker), the exact reads answer.
# Their budget is the 150 ms; they read the whole model, so they grow with the fleet.
DEGRADED = {"availability_exact": 150, "book_page_exact": 150, "placement_1_exact": 150,
            "placement_8_soon_exact": 150, "booked_ahead_exact": 150}  # fmt: skip
# Read after the hourly rollup has rolled the generated hour of raw samples into minutes:
# the idle list and "busy now" read the minute rollups, which the generator (unrolled, for
# the rollup's own figure) leaves empty, and every allocation would be idle at once.
AFTER_ROLLUP = ("dashboard_7d", "dashboard_90d")


def _pcts(times):
    times = sorted(times)
    return statistics.median(times), times[max(0, math.ceil(len(times) * 0.95) - 1)]


class _Viewer:
    """One signed-in user's requests. They go through Django's test client in this process
    (the warm-up, and the pass tracemalloc watches) or, while `served` is set, to a real
    gunicorn with the same session: what the figures time. In this process a request runs
    some 60 frames deep under pytest, and CPython 3.11 allocates its frame stack in chunks
    it maps and unmaps as a call crosses a chunk's edge (cpython#142183, fixed on the 3.13
    and 3.14 branches in March 2026): at 10k GPUs the book page took 50 ms there against
    35 ms at the top of a script, with 15 times the mmap calls. A server's request runs at a depth of its own.
    POSTs (quotes, bookings) go the same way, with the session's CSRF token (its cookie,
    set by a page, sent back in the header), as a browser's script sends them."""

    served = False

    def __init__(self, client, http):
        self.client, self.http = client, http
        self.csrf = None

    def get(self, url, **extra):
        return self.http.get(url, **extra) if self.served else self.client.get(url, **extra)

    def post(self, url, data, *, content_type, headers=None):
        if not self.served:
            return self.client.post(url, data, content_type=content_type, headers=headers)
        if self.csrf is None:
            assert self.http.get("/book/h100-sxm/").status_code == 200  # its form sets the cookie
            self.csrf = self.http.cookies[settings.CSRF_COOKIE_NAME]
        response = self.http.post(
            url, content=json.dumps(data),
            headers={"Content-Type": content_type, "X-CSRFToken": self.csrf, **(headers or {})},
        )  # fmt: skip
        assert response.status_code < 300, (url, response.status_code, response.text[:300])
        return response


def _get(client, url, **extra):
    response = client.get(url, **extra)
    assert response.status_code == 200, (url, response.status_code)
    if getattr(response, "streaming", False):
        size = sum(len(chunk) for chunk in response.streaming_content)
    else:
        size = len(response.content)
    return size


def _download(client, url) -> dict:
    """One streamed download read to its end: the milliseconds to its first chunk, its data
    rows (lines less the header) and rows a second over the whole body."""
    started = time.perf_counter()
    response = client.get(url)
    assert response.status_code == 200 and response.streaming, (url, response.status_code)
    chunks = iter(response.streaming_content)
    lines = next(chunks).count(b"\n")
    first = (time.perf_counter() - started) * 1000
    lines += sum(chunk.count(b"\n") for chunk in chunks)
    took = time.perf_counter() - started
    return {"first_chunk_ms": first, "rows": lines - 1, "rows_per_s": (lines - 1) / took}


def _timed(call, runs=RUNS, before=None):
    times = []
    for i in range(runs):
        if before:
            before()
        started = time.perf_counter()
        call(i)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _peak_mib(call):
    tracemalloc.start()
    try:
        call(10_000)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _rolled_back(name, call):
    """Run `call` in a transaction that is rolled back (placement locks rows, writes none)."""

    def run(_i):
        try:
            with transaction.atomic():
                assert call() is not None, f"{name}: no room"
                raise _Undo
        except _Undo:
            pass

    return run


class _Undo(Exception):
    pass


def _new_day_refresh(gpu_model_id, now):
    """The first refresh of the next UTC day, after the minute's run just before midnight
    (untimed), each pair rolled back; `rows`: the nodes it read (the model has `nodes`)."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    times, read = [], None
    for _ in range(RUNS + 1):  # the first warms
        with transaction.atomic():
            before = midnight - timedelta(minutes=1)
            assert isinstance(capacity_summary_refresh(gpu_model_id=gpu_model_id, now=before),
                              float)  # fmt: skip
            started = time.perf_counter()
            capacity_summary_refresh(
                gpu_model_id=gpu_model_id, now=midnight + timedelta(seconds=30)
            )
            times.append((time.perf_counter() - started) * 1000)
            shares = CapacityNodeDays.objects.filter(gpu_model_id=gpu_model_id)
            read = shares.filter(first_day=midnight.date()).count()
            nodes = shares.count()
            transaction.set_rollback(True)
    p50, p95 = _pcts(times[1:])
    return {"p50_ms": p50, "p95_ms": p95, "peak_mib": None, "rows": read, "nodes": nodes}


def _measure(client, staff_client, generated, gpus):
    now = db_now()
    customer_id = generated["customer"]
    figures = {}
    mine = Allocation.objects.filter(
        user_id=customer_id, state=AllocationState.RUNNING, cluster__isnull=True
    ).order_by("id")
    detail = mine.first()
    assert detail is not None
    acting = acting_as(get_user_model().objects.get(pk=customer_id))

    def quote_for_booking():
        return quote_create(
            acting=acting, gpu_model="h100-sxm", gpu_count=1, period="day", period_count=1
        )

    quotes = []
    h100 = GpuModel.objects.get(slug="h100-sxm")
    capacity_summaries_refresh()  # as the worker keeps it

    def summary_kept():
        capacity_summary_refresh(gpu_model_id=h100.pk)  # fresh for each timed read

    def booked_one():
        allocation_book(acting=acting, quote=quote_for_booking())

    def summary_gone():
        CapacitySummary.objects.all().delete()  # no worker: the exact statements answer

    calls = {
        "catalog": (lambda i: _get(client, "/")),
        "availability": (lambda i: _get(
            client, "/api/v1/availability/?gpu_model=h100-sxm&gpu_count=8&period=week")),
        "availability_exact": (lambda i: _get(
            client, "/api/v1/availability/?gpu_model=h100-sxm&gpu_count=8&period=week")),
        "book_page": (lambda i: _get(client, "/book/h100-sxm/")),
        "book_page_exact": (lambda i: _get(client, "/book/h100-sxm/")),
        "quote": (lambda i: client.post(
            "/api/v1/quotes/", {"gpu_model": "h100-sxm", "gpu_count": 1, "period": "day",
                                "period_count": 1}, content_type="application/json")),
        "booking": (lambda i: client.post(
            "/api/v1/bookings/", {"quote": str(quotes.pop())}, content_type="application/json",
            headers={"Idempotency-Key": str(uuid.uuid4())})),
        "allocation_page": (lambda i: _get(client, f"/allocations/{detail.pk}/")),
        "allocation_charts": (lambda i: _get(client, f"/allocations/{detail.pk}/telemetry.json")),
        "allocation_list": (lambda i: _get(client, "/allocations/")),
        "allocation_list_last_page": (lambda i: _get(client, "/allocations/?oldest=1")),
        "statement": (lambda i: _get(client, "/statement/")),
        "statement_last_page": (lambda i: _get(client, "/statement/?oldest=1")),
        "dashboard_7d": (lambda i: _get(staff_client, "/usage/?days=7")),
        "dashboard_90d": (lambda i: _get(staff_client, "/usage/?days=90")),
        "flags": (lambda i: _get(staff_client, "/flags/")),
        "nodes": (lambda i: _get(staff_client, "/api/v1/nodes/")),
        "booked_ahead": (lambda i: _get(staff_client, "/api/v1/usage/booked-ahead/")),
        "booked_ahead_exact": (lambda i: _get(staff_client, "/api/v1/usage/booked-ahead/")),
        "revenue": (lambda i: _get(staff_client, "/api/v1/usage/revenue/")),
        "metrics": (lambda i: _get(staff_client, "/metrics")),
        "enforcement": (lambda i: allocations_enforce()),
        "placement_1": _rolled_back(
            "placement_1", lambda: place_locked(
            gpu_model=GpuModel.objects.get(slug="h100-sxm"), gpu_count=1, starts_at=now,
            ends_at=now + timedelta(days=1))),
        # bounded by the capacity read model (kept fresh), and the same with it gone
        "placement_1_exact": _rolled_back(
            "placement_1_exact", lambda: place_locked(
            gpu_model=GpuModel.objects.get(slug="h100-sxm"), gpu_count=1, starts_at=now,
            ends_at=now + timedelta(days=1))),
        # a whole node from two days on (the summary's fewest free over its 30 days)
        "placement_8_soon": _rolled_back(
            "placement_8_soon", lambda: place_locked(
            gpu_model=GpuModel.objects.get(slug="h100-sxm"), gpu_count=8,
            starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=3))),
        "placement_8_soon_exact": _rolled_back(
            "placement_8_soon_exact", lambda: place_locked(
            gpu_model=GpuModel.objects.get(slug="h100-sxm"), gpu_count=8,
            starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=3))),
        # 40 days on: past the summary's horizon, the full read always
        "placement_8": _rolled_back(
            "placement_8", lambda: place_locked(
            gpu_model=GpuModel.objects.get(slug="h100-sxm"), gpu_count=8,
            starts_at=now + timedelta(days=40), ends_at=now + timedelta(days=41))),
        "capacity_refresh": (
            lambda i: capacity_summary_refresh(gpu_model_id=h100.pk, full=True)),
        # after one booking (untimed, `booked_one`): the refresh it queues
        "capacity_refresh_incremental": (
            lambda i: capacity_summary_refresh(gpu_model_id=h100.pk)),
        "placement_cluster_4": _rolled_back(
            "placement_cluster_4", lambda: place_cluster_locked(
            gpu_model=GpuModel.objects.get(slug="h100-sxm"), node_count=4, gpus_per_node=8,
            starts_at=now + timedelta(days=40), ends_at=now + timedelta(days=47))),
    }  # fmt: skip

    def measure(name, call):
        before = None
        if name.startswith("dashboard"):
            before = cache.clear
        if name in ("availability", "book_page", "placement_1", "placement_8_soon"):
            before = summary_kept
        if name == "booked_ahead":
            before = capacity_summaries_refresh  # every model's, as the worker keeps them
        if name in DEGRADED:
            before = summary_gone
        if name == "capacity_refresh_incremental":
            before = booked_one
        if name == "booking":
            quotes[:] = [quote_for_booking().pk for _ in range(RUNS + 1)]
        if before:
            before()
        call(0)  # warm: the first request of a kind compiles templates, fills caches
        if name == "booking":
            quotes.append(quote_for_booking().pk)
        if before:
            before()
        peak = _peak_mib(call)
        if name == "booking":  # each booking takes one of the quotes made for it
            quotes[:] = [quote_for_booking().pk for _ in range(RUNS + 1)]
        client.served = staff_client.served = True
        try:
            call(0)  # the server's first request of a kind
            p50, p95 = _pcts(_timed(call, before=before))
        finally:
            client.served = staff_client.served = False
        figures[name] = {"p50_ms": p50, "p95_ms": p95, "peak_mib": peak}

    for name, call in calls.items():
        if name not in AFTER_ROLLUP:
            measure(name, call)
    figures["capacity_refresh_new_day"] = _new_day_refresh(h100.pk, now)
    _download(client, "/statement.csv")  # warm
    runs = [_download(client, "/statement.csv") for _ in range(RUNS)]
    figures["statement_csv"] = {
        "first_chunk_ms": statistics.median(r["first_chunk_ms"] for r in runs),
        "rows_per_s": statistics.median(r["rows_per_s"] for r in runs),
        "rows": runs[0]["rows"],
        "peak_mib": _peak_mib(lambda i: _get(client, "/statement.csv")),
    }
    # The workers that change the world, once each, last. The generated raw samples (an
    # hour and the minutes since) are rolled up in one run but for their last minute, as a
    # rollup catching up after an hour does; that last minute is then the run beat makes
    # every minute, with the hour of samples before it (one that closes no hour: the run
    # after a clock hour's last minute also rolls up the hour).
    newest = GpuSample.objects.order_by("-at").values_list("at", flat=True).first()
    last_minute = newest.replace(second=0, microsecond=0)
    if last_minute.minute == 59:
        last_minute -= timedelta(minutes=1)
    for name, until in (("hourly_rollup", last_minute),
                        ("minute_rollup", last_minute + timedelta(minutes=1))):  # fmt: skip
        started = time.perf_counter()
        counts = telemetry_rollup(now=until)
        took = (time.perf_counter() - started) * 1000
        figures[name] = {"p50_ms": took, "p95_ms": took, "peak_mib": None,
                         "rows": counts.get("hour")}  # fmt: skip
    conf = settings.ANCHORGPU
    old = conf["ROLLUP_RETENTION"]
    conf["ROLLUP_RETENTION"] = timedelta(days=DAYS - 1)  # one day of rollups falls out
    try:
        started = time.perf_counter()
        pruned = telemetry_prune()
        retention = (time.perf_counter() - started) * 1000
    finally:
        conf["ROLLUP_RETENTION"] = old
    figures["retention"] = {"p50_ms": retention, "p95_ms": retention, "peak_mib": None,
                            "rows": pruned.get("rollups")}  # fmt: skip
    # The rollup wrote an hour of minutes and every GPU's newest busy minute into tables the
    # generator's ANALYZE saw without them; autovacuum analyzes such a change on its next
    # round (a minute apart), and the dashboard is read as it is from then on.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE telemetry_gpuhour, telemetry_gpubusy, telemetry_fleetrollup")
    # Beat closes the dashboard's hours every minute too: an hour that closed since the data
    # was generated is kept, as it would be by now.
    allocated_steps_close()
    for name in AFTER_ROLLUP:
        measure(name, calls[name])
    return figures


# What storage per row is measured on (docs/operations.md).
STORED = (
    "rentals_allocation", "rentals_allocationgpu", "rentals_allocationevent", "rentals_quote",
    "rentals_quoteline", "rentals_ledgerentry", "rentals_notice", "rentals_cluster",
    "telemetry_gpuhour", "telemetry_gpuday", "telemetry_fleetrollup", "telemetry_gpusample",
    "telemetry_poll",
    "telemetry_flag", "catalog_node", "catalog_gpu", "accounts_team", "auth_user",
)  # fmt: skip


def _table_size(table: str) -> str:
    """Bytes of a table with its indexes and TOAST, summed over its partitions where it has
    them, and its rows as the last ANALYZE counted them."""
    return (
        SQL(
            "SELECT sum(pg_total_relation_size(c.oid))::bigint, sum(greatest(c.reltuples, 0))::bigint"
            " FROM pg_class c WHERE c.relkind = 'r' AND (c.oid = {table}::regclass"
            " OR c.oid IN (SELECT relid FROM pg_partition_tree({table}::regclass) WHERE isleaf))"
        )
        .format(table=Literal(table))
        .as_string()
    )


def _storage():
    tables = {}
    with connection.cursor() as cursor:
        for table in STORED:
            cursor.execute(_table_size(table))
            size, rows = cursor.fetchone()
            tables[table] = {"bytes": size or 0, "rows": rows or 0,
                             "bytes_per_row": (size or 0) / rows if rows else None}  # fmt: skip
    return tables


def test_a_year_of_business_at_scale(client, django_user_model):
    sizes = _sizes()
    results, storage, generation = {}, {}, {}
    for gpus in sizes:
        started = time.perf_counter()
        # Unrolled: the hourly rollup below rolls the generated hour of raw samples.
        generated = generate_scale(gpus=gpus, days=DAYS, hourly_days=HOURLY_DAYS, reset=True,
                                   minutes_rolled=False, log=lambda line: None)  # fmt: skip
        generation[gpus] = time.perf_counter() - started
        report(f"scale: generating {gpus} GPUs, seconds per step",
               {step: {"s": s} for step, s in generated["timings"].items()})  # fmt: skip
        storage[gpus] = _storage()
        client.force_login(django_user_model.objects.get(username=CUSTOMER))
        staff_client = Client()
        staff_client.force_login(django_user_model.objects.get(username=STAFF))
        cookie = settings.SESSION_COOKIE_NAME
        with (
            gunicorn(workers=1, threads=1, pages=True) as url,
            httpx.Client(base_url=url, cookies={cookie: client.cookies[cookie].value}) as http,
            httpx.Client(
                base_url=url, cookies={cookie: staff_client.cookies[cookie].value}
            ) as staff_http,
            templates_as_served(),
        ):
            results[gpus] = _measure(
                _Viewer(client, http), _Viewer(staff_client, staff_http), generated, gpus
            )
        report(
            f"scale: {gpus} GPUs × {DAYS} days, generated in {generation[gpus]:.0f} s "
            f"({generated['rows']['rentals_allocation']} allocations, "
            f"{generated['rows']['rentals_ledgerentry']} ledger rows)",
            results[gpus],
        )
    report("storage per table at the largest size", storage[sizes[-1]])
    top, below = sizes[-1], (sizes[-2] if len(sizes) > 1 else None)
    rows = {}
    for name in (*CUSTOMER_FIGURES, *STAFF_FIGURES, *WORKER_FIGURES):
        figure = results[top][name]
        growth = figure["p50_ms"] / results[below][name]["p50_ms"] if below else None
        rows[name] = {
            **{f"{g}_p50_ms": results[g][name]["p50_ms"] for g in sizes},
            f"{top}_p95_ms": figure["p95_ms"], "growth": growth,
            "peak_mib": figure["peak_mib"],
        }  # fmt: skip
        budget = DEGRADED.get(name) or (
            50 if name in CUSTOMER_FIGURES else PER_FLEET.get(name) or BUDGET.get(name)
        )
        if budget is not None:
            target(f"scale_{name}_p50_ms", figure["p50_ms"], at_most=budget, unit=" ms")
        else:
            print(f"   scale_{name}_p50_ms: {figure['p50_ms']:.3g} ms (no budget)")
        if growth is not None:
            bound = top / below if name in PER_FLEET or name in DEGRADED else 1.5
            target(f"scale_{name}_growth", growth, at_most=bound, unit="×")
    downloads = {}
    for key, (bound, limit) in DOWNLOAD.items():
        values = [results[g]["statement_csv"][key] for g in sizes]
        name = "scale_statement_csv_peak_mib" if key == "peak_mib" else f"scale_csv_{key}"
        unit = {"first_chunk_ms": " ms", "rows_per_s": " rows/s", "peak_mib": " MiB"}[key]
        target(name, values[-1], **{bound: limit}, unit=unit)
        if below:  # growth: how much worse at the top size (rows a second: slower is worse)
            worse = values[-2] / values[-1] if bound == "at_least" else values[-1] / values[-2]
            target(f"{name}_growth", worse, at_most=1.5, unit="×")
        downloads[key] = dict(zip((f"{g}" for g in sizes), values, strict=True))
    report(f"scale: the statement's CSV as a download ({results[top]['statement_csv']['rows']}"
           " rows)", downloads)  # fmt: skip
    report(f"scale: p50 at {sizes}, p95 at {top}, growth {below}→{top}", rows)
