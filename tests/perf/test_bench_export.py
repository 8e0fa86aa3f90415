"""A statement export of BENCH_EXPORT_ROWS rows (500,000 by default, the threshold): how
fast the worker writes it, what it holds in memory doing so, what gzip saves in the
database at two levels, and how fast the file is served back.

Rows are copies of one booking's charge, a second apart, inserted by one statement; every
description is then the same, so the compression figures are an upper bound of what
varied statements save (they are recorded, not held to a target)."""

import os
import time
import tracemalloc

import pytest
from django.db import connection
from django.test import Client

from accounts.roles import acting_as
from rentals.models import LedgerEntry, StatementExport
from rentals.services import exports
from tests.perf.conftest import target
from tests.support.booking import book

pytestmark = [pytest.mark.perf, pytest.mark.django_db]

ROWS = int(os.environ.get("BENCH_EXPORT_ROWS", "500000"))
COLUMNS = (
    "team_id, user_id, allocation_id, period_id, kind, amount, net, vat, currency, quote_id, "
    "reason, period_count, impaired_span_id"
)


def _statement(team, rows: int) -> None:
    first = LedgerEntry.objects.filter(team=team).values_list("pk", flat=True).get()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO rentals_ledgerentry ({COLUMNS}, at) "  # noqa: S608 - our own names
            f"SELECT {COLUMNS}, at - n * interval '1 second' "
            "FROM rentals_ledgerentry, generate_series(1, %s) n WHERE id = %s",
            [rows - 1, first],
        )


def _run(acting, level, monkeypatch, *, traced=False) -> tuple[StatementExport, float, float]:
    """One export at gzip `level`: (it, seconds, peak MiB). tracemalloc slows Python down
    several times: the peak is taken on a pass of its own, as the scale benchmark does."""
    monkeypatch.setattr(exports, "GZIP_LEVEL", level)
    export = exports.statement_export_request(acting=acting, language="en")
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    assert exports.statement_export_run(export_id=export.pk) == "ready"
    took = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else 0.0
    tracemalloc.stop()
    export.refresh_from_db()
    return export, took, peak


def test_a_large_export_is_written_and_served_in_bounded_memory(catalog, alice, monkeypatch):
    allocation = book(alice, model="l4", count=1, period="day")
    acting = acting_as(alice)
    _statement(allocation.team, ROWS)
    level = exports.GZIP_LEVEL

    default, took, _peak = _run(acting, level, monkeypatch)
    other = 6 if level == 1 else 1
    fast, fast_took, _peak = _run(acting, other, monkeypatch)
    _export, _took, peak = _run(acting, level, monkeypatch, traced=True)
    assert default.rows == fast.rows == ROWS
    print(
        f"\n   export of {ROWS} rows: gzip level {level} {took:.2f} s, "
        f"{default.size / 2**20:.1f} MiB CSV -> {default.stored / 2**20:.2f} MiB in "
        f"{default.parts} parts; level {other} {fast_took:.2f} s -> {fast.stored / 2**20:.2f} MiB"
    )
    target("export_rows_per_s", ROWS / took, at_least=20_000, unit=" rows/s")
    target("export_write_peak_mib", peak, at_most=64, unit=" MiB")
    target("export_stored_ratio", default.stored / default.size, at_most=0.25)

    client = Client()
    client.force_login(alice)
    started = time.perf_counter()
    served = sum(map(len, client.get(f"/statement/exports/{default.pk}/").streaming_content))
    took = time.perf_counter() - started
    assert served == default.size
    tracemalloc.start()
    sum(map(len, client.get(f"/statement/exports/{default.pk}/").streaming_content))
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    target("export_download_rows_per_s", ROWS / took, at_least=100_000, unit=" rows/s")
    target("export_download_peak_mib", peak, at_most=64, unit=" MiB")
