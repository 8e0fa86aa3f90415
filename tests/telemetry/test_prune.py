"""The raw samples' retention never outruns the rollup: a sample past RAW_RETENTION that the
rollup has not read yet (its workers were down) waits for it, and goes once it is read. With
the operator's engine as the source, PostgreSQL keeps hours of them by default, not days."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from core.db import db_now
from telemetry.models import GpuSample, RollupMark
from telemetry.rollup import ROLLED_MARGIN, bucket_floor, telemetry_prune, telemetry_rollup
from tests.support.rollups import HOUR, samples_write

pytestmark = pytest.mark.django_db


def _oldest():
    return GpuSample.objects.order_by("at").values_list("at", flat=True).first()


def test_samples_the_rollup_has_not_read_wait_for_it(catalog, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "RAW_RETENTION": 6 * HOUR}
    now = bucket_floor(db_now(), "hour")
    start = now - 30 * HOUR
    samples_write(start, hours=30)
    written = GpuSample.objects.count()

    # The rollup has never run: it has read nothing, so nothing goes.
    assert telemetry_prune(now=now)["samples"] == 0
    assert GpuSample.objects.count() == written

    # It ran until 20 hours ago, then its workers stopped: what it has read goes (the last
    # hour of it kept for the holdings' edges), what it has not stays, retention or not.
    telemetry_rollup(now=now - 20 * HOUR)
    (read_until,) = {min(m.minutes_until, m.hours_until) for m in RollupMark.objects.all()}
    assert now - 22 * HOUR < read_until <= now - 20 * HOUR
    telemetry_prune(now=now)
    assert _oldest() == read_until - ROLLED_MARGIN
    assert GpuSample.objects.filter(at__lt=now - 6 * HOUR).exists()

    # Back: once read, the samples past the retention go.
    telemetry_rollup(now=now)
    telemetry_prune(now=now)
    assert _oldest() >= now - 6 * HOUR
    assert GpuSample.objects.filter(at__lt=now - 6 * HOUR + timedelta(minutes=1)).exists()


_RETENTION_READ = """
import importlib, json, os, sys
out = []
for variant in json.loads(sys.argv[1]):
    for name in ("TELEMETRY_SOURCE", "TELEMETRY_RAW_RETENTION_HOURS",
                 "TELEMETRY_RAW_RETENTION_DAYS"):
        os.environ.pop(name, None)
    os.environ.update(variant)
    import anchorgpu.settings as conf
    out.append(importlib.reload(conf).ANCHORGPU["RAW_RETENTION"].total_seconds() / 3600)
print(json.dumps(out))
"""


@pytest.mark.django_db(databases=[])
def test_an_engine_source_keeps_hours_of_raw_samples_unless_told_otherwise():
    engine = {"TELEMETRY_SOURCE": "prometheus", "PROMETHEUS_URL": "http://127.0.0.1:9"}
    variants = [{}, engine, {**engine, "TELEMETRY_RAW_RETENTION_DAYS": "3"},
                {**engine, "TELEMETRY_RAW_RETENTION_HOURS": "6"},
                {"TELEMETRY_RAW_RETENTION_HOURS": "12"}]  # fmt: skip
    read = subprocess.run(
        [sys.executable, "-c", _RETENTION_READ, json.dumps(variants)],
        cwd=Path(__file__).resolve().parents[2], env=os.environ, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert json.loads(read.stdout) == [7 * 24, 2, 3 * 24, 6, 12]
