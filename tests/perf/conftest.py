"""Benchmark helpers: a real gunicorn on the test database, a bounded load generator."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection, connections
from django.template import Template
from django.test.utils import _TestState, instrumented_test_render

from accounts.roles import acting_as
from anchorgpu.launcher import free_port, wait_for_port
from catalog.demo import seed_catalog
from rentals.services import allocation_book

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    # This hook sees every collected item, not only this folder's.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.perf)


def database_url():
    db = settings.DATABASES["default"]
    host = quote(db["HOST"], safe="") if db["HOST"].startswith("/") else db["HOST"]
    port = f":{db['PORT']}" if db.get("PORT") else ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgresql://{db['USER']}{password}@{host}{port}/{db['NAME']}"


@contextmanager
def gunicorn(workers=2, threads=4, *, pages=False):
    """A gunicorn on the test database; with `pages`, static files are collected first
    (pages name the hashed files)."""
    connections.close_all()
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url(), "LOG_LEVEL": "WARNING"}
    if pages:
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            cwd=ROOT, env=env, check=True,
        )  # fmt: skip
    env["AUTH_THROTTLE_RATE"] = env["PURCHASE_THROTTLE_RATE"] = "100000/s"
    env["QUOTE_THROTTLE_RATE"] = "100000/s"
    env["DJANGO_ALLOW_INSECURE"] = "true"  # plain HTTP on loopback
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "anchorgpu.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--threads", str(threads), "--log-level", "warning"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)


def load(base_url, make_request, *, clients=8, seconds=5.0, headers=None):
    """Run `make_request(client, i)` from `clients` threads for `seconds`; figures back."""
    latencies, errors = [], []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker(n):
        with httpx.Client(base_url=base_url, headers=headers or {}, timeout=30) as client:
            i = 0
            while time.monotonic() < deadline:
                started = time.perf_counter()
                response = make_request(client, n * 1_000_000 + i)
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status_code >= 400:
                        errors.append(response.status_code)
                i += 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / wall,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else None,
        "p95_ms": latencies[int(len(latencies) * 0.95) - 1] * 1000 if latencies else None,
        "errors": len(errors),
    }


# The targets; each benchmark records its figure against one with `target(...)`.
RESULTS: dict[str, dict] = {}


def target(name, value, *, baseline=None, at_least=None, at_most=None, unit=""):
    """Record `value` (a ratio to `baseline` or an absolute figure) against its target;
    `make bench` writes every record to bench.json and fails when one misses."""
    ok = (at_least is None or value >= at_least) and (at_most is None or value <= at_most)
    RESULTS[name] = {
        "value": value, "unit": unit, "baseline": baseline, "at_least": at_least,
        "at_most": at_most, "ok": ok,
    }  # fmt: skip
    bound = f">= {at_least}" if at_least is not None else f"<= {at_most}"
    print(f"   target {name}: {value:.3g}{unit} (target {bound}{unit}) {'ok' if ok else 'MISSED'}")


def pytest_sessionfinish(session, exitstatus):
    if not RESULTS:
        return
    (ROOT / "bench.json").write_text(json.dumps(RESULTS, indent=2, sort_keys=True) + "\n")
    missed = sorted(name for name, r in RESULTS.items() if not r["ok"])
    print(f"\nbench.json: {len(RESULTS)} figures, {len(missed)} below target: {missed}")
    if missed and session.exitstatus == 0:
        session.exitstatus = 1


# The audit log's triggers (pghistory's, audit/migrations): every trigger whose function
# writes an audit_* table.
_AUDIT_TRIGGERS = """
SELECT t.tgrelid::regclass::text, t.tgname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE NOT t.tgisinternal AND p.prosrc LIKE '%%INSERT INTO "audit_%%'
ORDER BY 1, 2
"""


@contextmanager
def audit_triggers_off():
    """The audit log's triggers disabled for the block (a benchmark's comparison only: the
    product never runs without them), enabled again after it."""
    with connection.cursor() as cursor:
        cursor.execute(_AUDIT_TRIGGERS)
        triggers = cursor.fetchall()
        for table, name in triggers:
            cursor.execute(f'ALTER TABLE {table} DISABLE TRIGGER "{name}"')
    try:
        yield len(triggers)
    finally:
        with connection.cursor() as cursor:
            for table, name in triggers:
                cursor.execute(f'ALTER TABLE {table} ENABLE TRIGGER "{name}"')


@contextmanager
def templates_as_served():
    """Templates render in the block as a web process renders them. Under pytest, Django's
    setup_test_environment() wraps every template render to send `template_rendered`, and
    the test client keeps a copy of each template's context for `response.context`: no
    server does that, and on a page of many small templates those copies were a third of
    its peak memory (the book page at 10k GPUs: 0.495 against 0.346 MiB; its time moved by
    about 1 %). A benchmark that reads a page's peak through the test client reads it
    inside this block (`response.context` is then empty)."""
    saved = getattr(_TestState, "saved_data", None)
    instrumented = Template._render
    if saved is None or instrumented is not instrumented_test_render:
        yield  # not instrumented: nothing to take off
        return
    Template._render = saved.template_render
    try:
        yield
    finally:
        Template._render = instrumented


def vacuum_analyze():
    """VACUUM (ANALYZE) the test database: what a benchmark measures is read with fresh
    statistics and all-visible pages, as autovacuum leaves a deployment's tables, whether or
    not the host's PostgreSQL runs autovacuum (the developers' and CI's have it off). Outside a
    transaction only (the benchmarks' `django_db(transaction=True)`)."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")


def book_in_threads(users, quotes) -> float:
    """Seconds for each user's thread to book its quotes through the service, all threads
    started together; each thread closes its own database connection."""
    vacuum_analyze()
    barrier = threading.Barrier(len(users))

    def book_all(user):
        try:
            barrier.wait()
            for quote in quotes[user.pk]:
                allocation_book(acting=acting_as(user), quote=quote)
        finally:
            connections.close_all()

    started = time.perf_counter()
    with ThreadPoolExecutor(len(users)) as pool:
        list(pool.map(book_all, users))
    return time.perf_counter() - started


def book_over_http(url: str, quotes: dict[str, list[str]]) -> tuple[list[int], float]:
    """Each API token's client books its quotes over HTTP (a fresh Idempotency-Key each), all
    clients at once: the answers' status codes and the seconds it took."""

    def book(token):
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as c:
            return [
                c.post("/api/v1/bookings/", json={"quote": q},
                       headers={"Idempotency-Key": str(uuid.uuid4())}).status_code
                for q in quotes[token]
            ]  # fmt: skip

    vacuum_analyze()
    started = time.perf_counter()
    with ThreadPoolExecutor(len(quotes)) as pool:
        codes = [c for batch in pool.map(book, quotes) for c in batch]
    return codes, time.perf_counter() - started


def samples_storage(cursor) -> tuple[int, int]:
    """Bytes of the raw samples' table and of its indexes, summed over its day partitions
    (the partitioned parent itself stores nothing)."""
    cursor.execute(
        "SELECT sum(pg_relation_size(relid))::bigint, sum(pg_indexes_size(relid))::bigint"
        " FROM pg_partition_tree('telemetry_gpusample') WHERE isleaf"
    )
    return cursor.fetchone()


def report(title, rows):
    print(f"\n== {title}")
    for name, figures in rows.items():
        text = ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()
        )
        print(f"   {name}: {text}")


def h100_fleet(prefix, count, *, url=None, spread_regions=False, group_size=None):
    """`count` H100 nodes of 8 GPUs on the demo catalog (seed it first); returns the nodes.

    `url(hostname)` gives each node's telemetry URL (default: its own :9400); with
    `group_size`, consecutive nodes share an InfiniBand network group of that many.
    """
    from catalog.models import Gpu, GpuModel, Node, Region

    model = GpuModel.objects.get(slug="h100-sxm")
    regions = list(Region.objects.all())
    url = url or (lambda hostname: f"http://{hostname}:9400/metrics")
    nodes = Node.objects.bulk_create(
        Node(
            hostname=(hostname := f"{prefix}-{i:05d}"),
            region=regions[i % len(regions)] if spread_regions else regions[0],
            gpu_model=model,
            exporter="dcgm",
            telemetry_url=url(hostname),
            **(
                {"network_group": f"{prefix}-ib-{i // group_size}", "fabric": "InfiniBand"}
                if group_size
                else {}
            ),
        )
        for i in range(count)
    )
    Gpu.objects.bulk_create(
        Gpu(node=n, index=g, uuid=f"GPU-{n.hostname}-{g}") for n in nodes for g in range(8)
    )
    if not connection.in_atomic_block:
        vacuum_analyze()
    return nodes


def fleet(nodes=100):
    """The demo's catalog and `nodes` H100 nodes: the booking benchmarks' world."""
    seed_catalog()
    h100_fleet("bench", nodes)


def pgbench_binary():
    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pgbench"
    return str(bundled) if bundled.exists() else shutil.which("pgbench")


def pgbench_tps(seconds=10, clients=8):
    """pgbench's TPC-B transactions per second on the test database's server, with `clients`
    connections: what a booking benchmark's throughput is measured against."""
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "PGHOST": db["HOST"],
        "PGUSER": db["USER"],
        "PGPORT": str(db.get("PORT") or 5432),
    }
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    name = "anchorgpu_pgbench"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        cursor.execute(f"CREATE DATABASE {name}")
    binary = pgbench_binary()
    subprocess.run([binary, "-i", "-q", "-s", "4", name], env=env, check=True, capture_output=True)
    out = subprocess.run(
        [binary, "-c", str(clients), "-j", "2", "-T", str(seconds), name],
        env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE {name}")
    return float(re.search(r"tps = ([\d.]+)", out).group(1))
