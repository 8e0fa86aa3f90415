"""One minute of N nodes × 8 GPUs (BENCH_NODES, default 2,000) ingested from each engine,
Prometheus and VictoriaMetrics, against the embedded poller's minute over the same fleet in
the same run: AnchorGPU's CPU per stored sample, and the ratio to the poller's.

The engines hold the minute before the pass: the simulator's own exporter bodies (4 scrapes
per node at 15 s, spread over the minute as an engine spreads its scrapes, with the labels a
scrape through our SD endpoint adds), backfilled into Prometheus by promtool and imported
into VictoriaMetrics, so the pass waits for no real minute. Each pass runs shard by shard
(POLL_SHARD_SIZE), as the Celery tasks do. The engine's own CPU to answer is measured too
(it is the operator's machine's, not ours); PostgreSQL's is not, as both paths COPY the
same rows."""

import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connections

from anchorgpu.launcher import free_port, wait_for_port
from catalog.demo import seed_catalog
from telemetry.models import GpuSample
from telemetry.poll import fetch_all, poll_nodes, run_async
from telemetry.remote import telemetry_ingest
from telemetry.simulator import EnergyMeter, SimGpu, SimNode, render_dcgm
from tests.perf.conftest import ROOT, database_url, h100_fleet, report, target
from tests.support import engines

pytestmark = pytest.mark.django_db(transaction=True)
NODES = int(os.environ.get("BENCH_NODES", "2000"))
SCRAPES_PER_MINUTE = 4  # one every 15 s, the embedded poller's interval
MINUTE = timedelta(minutes=1)


def _shards(ids):
    size = settings.ANCHORGPU["POLL_SHARD_SIZE"]
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def _the_minute(nodes, minute: datetime, folder: Path) -> tuple[Path, Path]:
    """The minute's scrapes as timestamped samples with each node's SD labels: an OpenMetrics
    file (seconds) for promtool, a Prometheus text file (milliseconds) for VictoriaMetrics."""
    meter = EnergyMeter()
    sims = [
        SimNode(
            hostname=n.hostname,
            exporter="dcgm",
            model_name="NVIDIA H100 80GB HBM3",
            memory_mib=81559,
            gpus=[SimGpu(g, f"GPU-{n.hostname}-{g}", "running") for g in range(8)],
        )  # fmt: skip
        for n in nodes
    ]
    start_ms = int(minute.timestamp() * 1000)
    om, text = folder / "minute.om", folder / "minute.prom"
    with om.open("w") as om_file, text.open("w") as text_file:
        for k in range(SCRAPES_PER_MINUTE):
            for i, sim in enumerate(sims):
                ms = start_ms + k * 15_000 + (i * 15_000) // len(sims)
                extra = f'anchorgpu_node="{sim.hostname}",instance="{sim.hostname}",job="anchorgpu"'
                for line in render_dcgm(sim, ms / 1000, meter=meter).splitlines():
                    if not line or line.startswith("#"):
                        continue
                    series, value = line.rsplit(" ", 1)
                    series = series[:-1] + "," + extra + "}"
                    om_file.write(f"{series} {value} {ms / 1000:.3f}\n")
                    text_file.write(f"{series} {value} {ms}\n")
        om_file.write("# EOF\n")
    return om, text


def _cpu_pass(run) -> tuple[float, float, int]:
    """(CPU seconds of this process, wall seconds, samples stored) for `run()`."""
    before = GpuSample.objects.count()
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, GpuSample.objects.count() - before


def test_ingest_a_minute_from_each_engine_against_the_poller(settings):
    seed_catalog()
    port = free_port()
    nodes = h100_fleet(
        "sim", NODES, url=lambda hostname: f"http://127.0.0.1:{port}/nodes/{hostname}/metrics"
    )
    ids = [n.pk for n in nodes]
    shards = _shards(ids)
    minute = datetime.now(UTC).replace(second=0, microsecond=0) - 3 * MINUTE
    settings.ANCHORGPU = {
        **settings.ANCHORGPU,
        "TELEMETRY_SOURCE": "prometheus",
        "PROMETHEUS": {**settings.ANCHORGPU["PROMETHEUS"], "REPULL_MINUTES": 1, "LAG": 2.0,
                       "TIMEOUT": 60.0},
    }  # fmt: skip
    rows = {}

    # The embedded poller: one minute is SCRAPES_PER_MINUTE polls of every shard.
    connections.close_all()
    simulator = subprocess.Popen(
        [sys.executable, "manage.py", "simulate_nodes", "--port", str(port), "--no-story",
         "--refresh", "3600"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": database_url()}, start_new_session=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, timeout=60)
        run_async(fetch_all([(n.pk, n.telemetry_url) for n in nodes[:50]]))  # warm up

        def poll_a_minute():
            for _ in range(SCRAPES_PER_MINUTE):
                for shard in shards:
                    assert poll_nodes(shard)["samples"] == len(shard) * 8

        cpu, wall, samples = _cpu_pass(poll_a_minute)
    finally:
        simulator.terminate()
        simulator.wait(20)
    assert samples == NODES * 8 * SCRAPES_PER_MINUTE
    embedded_us = cpu / samples * 1e6
    rows["embedded poller (baseline)"] = {
        "cpu_s": cpu, "wall_s": wall, "samples": samples, "cpu_us_per_sample": embedded_us,
    }  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="anchorgpu-bench-remote-") as tmp:
        om, text = _the_minute(nodes, minute, Path(tmp))
        with engines.prometheus(None, openmetrics=om) as prom, engines.victoria_metrics(None) as vm:
            with text.open("rb") as body:
                httpx.post(f"{vm.url}/api/v1/import/prometheus", content=body, timeout=600)
            vm.flush()
            for engine in (prom, vm):
                settings.ANCHORGPU = {
                    **settings.ANCHORGPU,
                    "PROMETHEUS": {**settings.ANCHORGPU["PROMETHEUS"], "URL": engine.url},
                }
                now = minute + MINUTE + timedelta(seconds=2.5)
                telemetry_ingest(shards[0], now=now)  # warm up (it replaces what it stores)
                GpuSample.objects.filter(at__gte=minute, at__lt=minute + MINUTE).delete()
                engine_cpu = engine.cpu_seconds()

                def ingest_a_minute(now=now):
                    for shard in shards:
                        result = telemetry_ingest(shard, now=now)
                        assert result["until"] == minute + MINUTE, result
                        assert result["samples"] == len(shard) * 8 * SCRAPES_PER_MINUTE, result

                cpu, wall, samples = _cpu_pass(ingest_a_minute)
                engine_cpu = engine.cpu_seconds() - engine_cpu
                assert samples == NODES * 8 * SCRAPES_PER_MINUTE
                rows[f"ingest from {engine.name}"] = {
                    "cpu_s": cpu, "wall_s": wall, "samples": samples,
                    "cpu_us_per_sample": cpu / samples * 1e6,
                    "ratio_to_poller": cpu / samples * 1e6 / embedded_us,
                    "engine_cpu_us_per_sample": engine_cpu / samples * 1e6,
                }  # fmt: skip
    report(
        f"telemetry ingest: one minute of {NODES} nodes × 8 GPUs ({SCRAPES_PER_MINUTE} scrapes),"
        f" shards of {settings.ANCHORGPU['POLL_SHARD_SIZE']}, CPU of this process",
        rows,
    )
    # Reading the engine is to cost no more CPU per sample than scraping every node again.
    for name in ("prometheus", "victoria-metrics"):
        row = rows[f"ingest from {name}"]
        target(
            f"remote_ingest_{name.replace('-', '_')}_cpu_to_poller", row["ratio_to_poller"],
            baseline="embedded poller, same fleet, same run", at_most=1.0, unit="×",
        )  # fmt: skip
