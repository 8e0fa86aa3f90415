"""The rollup's catch-up of an hour of raw samples, timed: wall, this process's CPU and the
PostgreSQL backend's CPU (read from /proc, so PostgreSQL must run on this machine).

`generate_scale(gpus=N, days=DAYS, hourly_days=1, raw_hours=1, minutes_rolled=False)`, then
RUNS times: undo what a catch-up wrote, run `telemetry_rollup` at the last whole minute of
the generated samples (the catch-up) and a minute later (beat's next run). Prints JSON with
the medians and the bytes per row of the per-GPU rollup table. Runs against the former
per-GPU rollups too (it tells them apart), so before and after compare on one machine:

    N=1000 RUNS=3 DATABASE_URL=… REDIS_URL=… DJANGO_SECRET_KEY=… \
        DJANGO_SETTINGS_MODULE=anchorgpu.settings PYTHONPATH=. \
        .venv/bin/python scripts/rollup_catchup_bench.py

It empties every table `generate_scale` writes: never on a database that matters.
"""

import json
import os
import statistics
import sys
import time
from datetime import timedelta

import django

django.setup()
from django.db import connection  # noqa: E402

from anchorgpu.scale import generate_scale  # noqa: E402
from telemetry import models  # noqa: E402
from telemetry.models import GpuSample  # noqa: E402
from telemetry.rollup import telemetry_rollup  # noqa: E402

N = int(os.environ["N"])
RUNS = int(os.environ.get("RUNS", "3"))
NEW = hasattr(models, "GpuHour")


def backend_cpu(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


started = time.perf_counter()
generate_scale(
    gpus=N,
    days=int(os.environ.get("DAYS", "3")),
    hourly_days=1,
    raw_hours=1.0,
    reset=True,
    minutes_rolled=False,
    log=lambda line: None,
)
generation = time.perf_counter() - started
newest = GpuSample.objects.order_by("-at").values_list("at", flat=True).first()
oldest = GpuSample.objects.order_by("at").values_list("at", flat=True).first()
samples = GpuSample.objects.count()
last_minute = newest.replace(second=0, microsecond=0)
if last_minute.minute == 59:
    last_minute -= timedelta(minutes=1)
hour_from = oldest.replace(minute=0, second=0, microsecond=0)


def undo():
    """Back to the state after generation: what the catch-up wrote is deleted."""
    with connection.cursor() as c:
        if NEW:
            c.execute("DELETE FROM telemetry_rollupmark")
            c.execute("DELETE FROM telemetry_gpuhour WHERE at >= %s", [hour_from])
            c.execute("DELETE FROM telemetry_gpuday WHERE at >= %s", [hour_from.replace(hour=0)])
        else:
            c.execute("DELETE FROM telemetry_gpurollup WHERE at >= %s", [hour_from.replace(hour=0)])
        c.execute(
            "DELETE FROM telemetry_fleetrollup WHERE bucket = 'minute' OR at >= %s", [hour_from]
        )
        c.execute("DELETE FROM telemetry_gpubusy")
    with connection.cursor() as c:
        c.execute("VACUUM ANALYZE telemetry_fleetrollup")
        c.execute("VACUUM ANALYZE telemetry_gpubusy")
        c.execute("VACUUM ANALYZE " + ("telemetry_gpuhour" if NEW else "telemetry_gpurollup"))


with connection.cursor() as c:
    c.execute("SELECT pg_backend_pid()")
    pid = c.fetchone()[0]
figures = {"catchup": [], "minute": []}
for _ in range(RUNS):
    undo()
    for name, until in (("catchup", last_minute), ("minute", last_minute + timedelta(minutes=1))):
        b, p, t = backend_cpu(pid), time.process_time(), time.perf_counter()
        counts = telemetry_rollup(now=until)
        figures[name].append(
            {
                "wall_s": round(time.perf_counter() - t, 3),
                "backend_cpu_s": round(backend_cpu(pid) - b, 3),
                "python_cpu_s": round(time.process_time() - p, 3),
                "counts": {k: v for k, v in counts.items() if isinstance(v, int)},
            }
        )
summary = {
    name: {
        k: statistics.median(r[k] for r in runs)
        for k in ("wall_s", "backend_cpu_s", "python_cpu_s")
    }
    for name, runs in figures.items()
}
with connection.cursor() as c:
    table = "telemetry_gpuhour" if NEW else "telemetry_gpurollup"
    c.execute(f"VACUUM ANALYZE {table}")
    c.execute(
        "SELECT sum(pg_total_relation_size(c.oid)), sum(c.reltuples) FROM pg_class c"
        " WHERE c.oid = %s::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
        [table, table],
    )
    size, rows = c.fetchone()
print(
    json.dumps(
        {
            "new": NEW,
            "gpus": N,
            "samples": samples,
            "from": str(oldest),
            "last_minute": str(last_minute),
            "generation_s": round(generation),
            "median": summary,
            "runs": figures,
            "table": table,
            "bytes": size,
            "rows": rows,
            "bytes_per_row": (float(size) / rows) if rows else None,
        },
        indent=1,
        default=str,
    )
)
sys.stdout.flush()
