"""A week's chart of one node's 8 GPUs drawn from each engine (TELEMETRY_SOURCE=prometheus):
`gpu_series` over BENCH_ENGINE_CHART_DAYS (default 7) of minute points, the engine's
`query_range`s and the answer built from them: the wall, this process's CPU (reading the
engine's JSON, building the points) and the engine's own CPU to answer.

The engines hold the samples before the pass: dcgm-exporter's six chart families for 8 GPUs
every BENCH_ENGINE_CHART_SCRAPE_S (default 30) with the SD labels, backfilled into
Prometheus by promtool and imported into a VictoriaMetrics that keeps them a month. Building
Prometheus's blocks takes most of the wall time (about 3 minutes for a week on a 2-core
machine)."""

import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from catalog.demo import seed_catalog
from catalog.models import Gpu
from telemetry.promapi import ms_of
from telemetry.selectors import gpu_series
from tests.perf.conftest import h100_fleet, report
from tests.support import engines

pytestmark = pytest.mark.django_db
DAYS = float(os.environ.get("BENCH_ENGINE_CHART_DAYS", "7"))
EVERY_S = int(os.environ.get("BENCH_ENGINE_CHART_SCRAPE_S", "30"))
RUNS = 3


def _samples(hostname: str, uuids: list[str], *, start: datetime, folder: Path):
    """The chart's families every EVERY_S from `start` for DAYS: an OpenMetrics file
    (seconds) for promtool, a Prometheus text file (milliseconds) for VictoriaMetrics."""
    om, text = folder / "week.om", folder / "week.prom"
    with om.open("w") as om_file, text.open("w") as text_file:
        for k in range(int(DAYS * 86400) // EVERY_S):
            ms = ms_of(start) + k * EVERY_S * 1000 + 321
            for g, uuid in enumerate(uuids):
                labels = f'UUID="{uuid}",gpu="{g}",anchorgpu_node="{hostname}",job="anchorgpu"'
                used = 20000 + (k * 37 + g) % 40000
                for name, value in (
                    ("DCGM_FI_DEV_GPU_UTIL", (k * 7 + g) % 101),
                    ("DCGM_FI_DEV_POWER_USAGE", 100 + (k % 50) * 7.25),
                    ("DCGM_FI_DEV_GPU_TEMP", 40 + k % 30),
                    ("DCGM_FI_DEV_FB_USED", used),
                    ("DCGM_FI_DEV_FB_FREE", 81000 - used),
                    ("DCGM_FI_DEV_FB_RESERVED", 559),
                ):
                    om_file.write(f"{name}{{{labels}}} {value} {ms / 1000:.3f}\n")
                    text_file.write(f"{name}{{{labels}}} {value} {ms}\n")
        om_file.write("# EOF\n")
    return om, text


def test_a_week_chart_of_8_gpus_from_each_engine(settings):
    seed_catalog()
    (node,) = h100_fleet("chart", 1)
    gpus = list(Gpu.objects.filter(node=node).order_by("index"))
    end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
    start = end - timedelta(days=DAYS)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="anchorgpu-bench-charts-") as tmp:
        folder = Path(tmp)
        om, text = _samples(node.hostname, [g.uuid for g in gpus], start=start, folder=folder)
        with (
            engines.prometheus(None, openmetrics=om) as prom,
            engines.victoria_metrics(None, retention="31d") as vm,
        ):
            with text.open("rb") as body:
                httpx.post(f"{vm.url}/api/v1/import/prometheus", content=body, timeout=600)
            vm.flush()
            for engine in (prom, vm):
                settings.ANCHORGPU = {
                    **settings.ANCHORGPU,
                    "TELEMETRY_SOURCE": "prometheus",
                    "PROMETHEUS": {
                        **settings.ANCHORGPU["PROMETHEUS"], "URL": engine.url, "TIMEOUT": 60.0,
                    },
                }  # fmt: skip
                walls, engine_cpu, our_cpu = [], engine.cpu_seconds(), time.process_time()
                for _ in range(RUNS):
                    began = time.perf_counter()
                    chart = gpu_series(gpus=gpus, start=start, end=end)
                    walls.append(time.perf_counter() - began)
                engine_cpu = (engine.cpu_seconds() - engine_cpu) / RUNS
                our_cpu = (time.process_time() - our_cpu) / RUNS
                assert chart["source"] == "engine" and "engine_from" not in chart, chart.keys()
                points = sum(len(g["points"]) for g in chart["gpus"])
                assert points >= len(gpus) * (int(DAYS * 1440) - 1), points
                rows[engine.name] = {
                    "wall_p50_s": statistics.median(walls),
                    "wall_max_s": max(walls),
                    "engine_cpu_s": engine_cpu,
                    "our_cpu_s": our_cpu,
                    "points": points,
                }
    report(
        f"a {DAYS:g}-day chart of 8 GPUs from the engine (minute points, samples every "
        f"{EVERY_S} s), per chart: gpu_series wall, its CPU, the engine's CPU; {RUNS} runs",
        rows,
    )
