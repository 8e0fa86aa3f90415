"""Why raw samples carry a (gpu, at) index: a chart's time-range read with and without it."""

import statistics
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from catalog.demo import seed_catalog
from telemetry.models import GpuSample
from tests.perf.conftest import h100_fleet, report, samples_storage

pytestmark = pytest.mark.django_db

FILL = """
INSERT INTO telemetry_gpusample (gpu_id, at, utilization, memory_used_mib, memory_total_mib,
                               power_w, temperature_c, energy_j, xid)
SELECT g.id, t, 50, 40000, 81559, 300, 60, 1e6, 0
FROM catalog_gpu g
CROSS JOIN generate_series(%(now)s::timestamptz - interval '12 hours', %(now)s, interval '15 seconds') AS t
WHERE g.node_id IN (SELECT id FROM catalog_node WHERE hostname LIKE 'idx-%%')
"""

READ = """
SELECT gpu_id, at, utilization FROM telemetry_gpusample
WHERE gpu_id = ANY(%(gpus)s) AND at >= %(start)s AND at <= %(end)s ORDER BY at
"""


def median_ms(cursor, params, runs=7):
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        cursor.execute(READ, params)
        cursor.fetchall()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def test_time_range_read_with_and_without_the_index():
    seed_catalog()
    nodes = h100_fleet("idx", 100)
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"now": now})
        cursor.execute("ANALYZE telemetry_gpusample")
        rows = GpuSample.objects.count()
        gpus = list(nodes[42].gpus.values_list("pk", flat=True))
        params = {"gpus": gpus, "start": now - timedelta(hours=1), "end": now}
        indexed = median_ms(cursor, params)
        cursor.execute("SET enable_indexscan = off; SET enable_bitmapscan = off")
        scanned = median_ms(cursor, params, runs=3)
        cursor.execute("RESET enable_indexscan; RESET enable_bitmapscan")
        table_bytes, index_bytes = samples_storage(cursor)
    report(
        f"raw samples: {rows} rows (800 GPUs × 12 h at 15 s); one allocation's 8 GPUs, last hour",
        {
            "with the (gpu, at) index": {"median_ms": indexed},
            "sequential scan (baseline)": {
                "median_ms": scanned,
                "ratio_to_indexed": scanned / indexed,
            },
            "storage": {
                "table_bytes_per_row": table_bytes / rows,
                "index_bytes_per_row": index_bytes / rows,
            },
        },
    )
