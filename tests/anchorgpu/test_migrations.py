"""Data from the old layout survives the move to the new one: API tokens from the project
package to accounts, polls, samples, rollups and flags from rentals to telemetry, stored
idempotent responses from JSON to the bytes the client saw."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts.models import ApiToken
from rentals.models import IdempotencyKey
from telemetry.models import Flag, GpuRollup, GpuSample, Poll

# The last migrations before telemetry and accounts became apps of their own.
OLD_LAYOUT = [
    ("anchorgpu", "0001_initial"),
    ("accounts", None),
    ("catalog", "0003_rentalperiod_duration_guard"),
    ("telemetry", None),
    ("rentals", "0003_rollup_day_bucket"),
    ("glossary", "0002_load_terms"),
]


def _tables():
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


@pytest.fixture
def old_layout(transactional_db):
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(OLD_LAYOUT)
        executor.loader.build_graph()
        yield executor.loader.project_state([t for t in OLD_LAYOUT if t[1]]).apps
    finally:
        _migrate_to_latest()


def _migrate_to_latest():
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_old_layout_rows_survive_the_move(old_layout):
    old = old_layout
    assert {"rentals_gpusample", "anchorgpu_apitoken"} <= _tables()
    now = timezone.now()
    user = old.get_model("auth", "User").objects.create(username="carol")
    token = old.get_model("anchorgpu", "ApiToken").objects.create(
        user=user, name="ci", key_hash="a" * 64, hint="agpu_abcd"
    )
    region = old.get_model("catalog", "Region").objects.create(slug="r", name="R")
    model = old.get_model("catalog", "GpuModel").objects.create(
        slug="h100", name="H100", vendor="nvidia", memory_gb=80, memory_reported_mib=81559,
        bandwidth_gbps=3350, stack="cuda", compute_target="9.0",
    )  # fmt: skip
    node = old.get_model("catalog", "Node").objects.create(
        hostname="n1", region=region, gpu_model=model, telemetry_url="http://n1:9400/metrics",
        exporter="dcgm",
    )  # fmt: skip
    gpu = old.get_model("catalog", "Gpu").objects.create(node=node, index=0, uuid="GPU-1")
    old.get_model("rentals", "Poll").objects.create(
        node=node, at=now, duration_ms=12, outcome="ok", gpus_seen=1
    )
    old.get_model("rentals", "GpuSample").objects.create(
        gpu=gpu, at=now, utilization=87.5, energy_j=1.5e9, xid=0
    )
    old.get_model("rentals", "GpuRollup").objects.create(
        gpu=gpu, bucket="hour", at=now.replace(minute=0, second=0, microsecond=0), samples=240,
        utilization_avg=80.0,
    )  # fmt: skip
    old.get_model("rentals", "Flag").objects.create(gpu=gpu, kind="hot", opened_at=now)
    keys = old.get_model("rentals", "IdempotencyKey")
    keys.objects.create(
        user=user, key="k-ok", fingerprint="f", status_code=201, body={"id": "x"}, created_at=now
    )
    keys.objects.create(
        user=user, key="k-refused", fingerprint="f", status_code=409,
        body={"code": "no_capacity", "status": 409}, created_at=now - timedelta(hours=1),
    )  # fmt: skip

    _migrate_to_latest()

    tables = _tables()
    assert {"telemetry_gpusample", "telemetry_poll", "accounts_apitoken"} <= tables
    assert not {"rentals_gpusample", "rentals_flag", "anchorgpu_apitoken"} & tables
    assert ApiToken.objects.get().pk == token.pk and ApiToken.objects.get().hint == "agpu_abcd"
    sample = GpuSample.objects.get()
    assert (sample.gpu_id, sample.utilization, sample.energy_j) == (gpu.pk, 87.5, 1.5e9)
    assert Poll.objects.get().duration_ms == 12
    assert GpuRollup.objects.get().samples == 240
    assert Flag.objects.get(closed_at__isnull=True).kind == "hot"
    ok, refused = (
        IdempotencyKey.objects.get(key="k-ok"),
        IdempotencyKey.objects.get(key="k-refused"),
    )
    assert json.loads(bytes(ok.body)) == {"id": "x"} and ok.content_type == "application/json"
    assert json.loads(bytes(refused.body))["code"] == "no_capacity"
    assert refused.content_type == "application/problem+json"
