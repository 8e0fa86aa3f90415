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

With `FANOUT=P` (worker processes) each run is made twice over the same samples: serially
in this process (`telemetry_rollup`), then as beat's task makes it (`rollup_fan_out`: the
run's start here, one task per shard on the rollup queue, each followed by a refresh),
through a real Celery worker the script starts (`-Q rollup --concurrency P`, prefork). A
fan-out run ends when every task it queued has finished (the worker's task events, counted
here: one pass and one refresh per shard, two more for each pass capped by
`TELEMETRY_ROLLUP_MAX_HOURS_PER_PASS`, which queues its shard's next pass). Its CPU is the worker's processes' (Python) and
the PostgreSQL backends' of this database (the worker keeps its connections, where Celery
would close them after each task: a backend's CPU is read from /proc while it lives). The
shard size is the product's setting (`TELEMETRY_ROLLUP_SHARD_SIZE`): 2501 makes 4 shards
of 10,000 GPUs.

    N=10000 RUNS=3 FANOUT=2 TELEMETRY_ROLLUP_SHARD_SIZE=2501 … (as above)

`RAW_HOURS=H` generates H hours of raw samples (an outage's backlog) instead of one; with
`TELEMETRY_ROLLUP_MAX_HOURS_PER_PASS` below H, each catch-up is several passes a shard (the
serial run's `passes`).

It empties every table `generate_scale` writes: never on a database that matters.
"""

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import django

django.setup()
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from anchorgpu.scale import generate_scale  # noqa: E402
from telemetry import models  # noqa: E402
from telemetry.models import GpuSample  # noqa: E402

GpuHour = getattr(models, "GpuHour", None)
from telemetry.rollup import telemetry_rollup  # noqa: E402

N = int(os.environ["N"])
RUNS = int(os.environ.get("RUNS", "3"))
FANOUT = int(os.environ.get("FANOUT", "0"))
NEW = hasattr(models, "GpuHour")


def backend_cpu(pid):
    """A process's CPU so far (user and system), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid):
    for child in map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split()):
        yield child
        yield from descendants(child)


started = time.perf_counter()
generate_scale(
    gpus=N,
    days=int(os.environ.get("DAYS", "3")),
    hourly_days=1,
    raw_hours=float(os.environ.get("RAW_HOURS", "1")),
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
            if FANOUT:
                c.execute("DELETE FROM telemetry_hourswritten")
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


class Worker:
    """A real rollup worker (prefork, FANOUT processes, task events on), and the count of the
    tasks it has finished, from its events."""

    def __init__(self, processes: int):
        from anchorgpu import queues
        from anchorgpu.celery import app

        self.app, self.finished, self.online = app, 0, threading.Event()
        self.owed = 0  # tasks queued by the tasks themselves: a capped pass's next pass
        self.changed = threading.Condition()
        app.control.purge()
        threading.Thread(target=self._events, daemon=True).start()
        # Celery closes a task's database connection after it (a new backend per task), and
        # a backend's CPU can no longer be read once it has exited: this worker keeps its
        # connections (Celery's CELERY_DB_REUSE_MAX), or the benchmark would lose their CPU.
        keep = "import sys; from anchorgpu.celery import app; app.conf.CELERY_DB_REUSE_MAX = 10**9; app.worker_main(sys.argv[1:])"  # fmt: skip
        self.process = subprocess.Popen(
            [sys.executable, "-c", keep, "worker", "-E",
             "--queues", queues.ROLLUP, "--concurrency", str(processes), "--pool", "prefork",
             "--hostname", f"rollup-bench-{os.getpid()}@%h", "--loglevel", "WARNING",
             "--without-gossip", "--without-mingle"],
            cwd=Path(__file__).resolve().parent.parent, stdout=sys.stderr,
        )  # fmt: skip
        if not self.online.wait(120):
            raise SystemExit("the rollup worker did not come online")

    def _events(self):
        def online(event):
            if event["hostname"].startswith("rollup-bench-"):
                self.online.set()

        def done(event):
            with self.changed:
                self.finished += 1
                if "'capped': True" in event.get("result", ""):
                    self.owed += 2  # it queued the shard's next pass, and that a refresh
                self.changed.notify_all()

        with self.app.connection() as conn:
            handlers = {"worker-online": online, "task-succeeded": done, "task-failed": done}
            self.app.events.Receiver(conn, handlers=handlers).capture(limit=None, timeout=None)

    def wait(self, count: int, timeout: float = 600) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: self.finished - self.owed >= count, timeout):
                raise SystemExit(f"{self.finished} of {count} tasks finished in {timeout} s")

    def cpu(self) -> float:
        """Every worker process's CPU so far (the pool's children included)."""
        main = self.process.pid
        return sum(backend_cpu(p) for p in (main, *descendants(main)))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


def backends_cpu() -> dict[int, float]:
    """The CPU so far of every other backend connected to this database."""
    with connection.cursor() as c:
        c.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return {pid: backend_cpu(pid) for (pid,) in c.fetchall()}


def fanned_out(worker: Worker, until) -> dict:
    """One run as beat's task makes it, timed until all it queued has finished."""
    from telemetry.tasks import rollup_fan_out

    before_backends, before_worker = backends_cpu(), worker.cpu()
    b, p, t = backend_cpu(pid), time.process_time(), time.perf_counter()
    with worker.changed:
        expected = worker.finished - worker.owed
    shards = rollup_fan_out(now=until)
    worker.wait(expected + 2 * shards)  # a pass and a refresh per shard, and per capped pass
    wall = time.perf_counter() - t
    after = backends_cpu()
    backends = sum(cpu - before_backends.get(pid_, 0.0) for pid_, cpu in after.items())
    return {
        "wall_s": round(wall, 3),
        "backend_cpu_s": round(backends + backend_cpu(pid) - b, 3),
        "python_cpu_s": round(worker.cpu() - before_worker + time.process_time() - p, 3),
        "shards": shards,
        "gpu_hours": GpuHour.objects.filter(at__gte=hour_from).count(),  # as the serial run's
    }


with connection.cursor() as c:
    c.execute("SELECT pg_backend_pid()")
    pid = c.fetchone()[0]
figures = {"catchup": [], "minute": []}
if FANOUT:
    figures |= {"fanout_catchup": [], "fanout_minute": []}
    worker = Worker(FANOUT)
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
    if FANOUT:
        undo()
        for name, until in (("fanout_catchup", last_minute),
                            ("fanout_minute", last_minute + timedelta(minutes=1))):  # fmt: skip
            figures[name].append(fanned_out(worker, until))
if FANOUT:
    worker.stop()
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
            "fanout_processes": FANOUT,
            "shard_size": settings.ANCHORGPU["ROLLUP_SHARD_SIZE"],
            "load_avg": os.getloadavg(),
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
