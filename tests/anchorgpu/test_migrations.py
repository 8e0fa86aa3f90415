"""Data from older layouts survives the migrations: API tokens from the project
package to accounts, polls, samples, rollups and flags from rentals to telemetry, stored
idempotent responses from JSON to the bytes the client saw."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts.access import acting_as
from accounts.models import ApiToken, Membership, Team
from core.sealed import unseal
from rentals import selectors
from rentals.models import IdempotencyKey, Quote
from telemetry.models import Flag, FleetSize, GpuRollup, GpuSample, Poll
from tests import dbtemplate
from webhooks.models import WebhookEndpoint

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
    yield from _models_at(OLD_LAYOUT)


def _models_at(targets):
    """The database at `targets`, and the models as they were there; afterwards a fresh copy
    of the template. An old state is reached the cheaper way: unapplying what came after
    it, or, when that is more than a quarter of the project, from an empty database
    migrated forward to it (Django renders the project's state before each migration it
    unapplies: 34 unapplied took 80 s, the 24 that lead there from nothing 6 s)."""
    executor = MigrationExecutor(connection)
    if 4 * len(executor.migration_plan(targets)) > len(executor.loader.graph.nodes):
        dbtemplate.test_database_recreate(empty=True)
        executor = MigrationExecutor(connection)
    try:
        executor.migrate(targets)
        executor.loader.build_graph()
        yield executor.loader.project_state([t for t in targets if t[1]]).apps
    finally:
        dbtemplate.test_database_recreate()


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


BEFORE_TEAMS = [
    ("accounts", "0005_profile_and_sign_in_history"),
    ("rentals", "0006_period_duration_guard"),
    ("catalog", "0009_node_ssh_details"),  # before the catalog's words had a column each
]


@pytest.fixture
def before_teams(transactional_db):
    yield from _models_at(BEFORE_TEAMS)


def test_rows_move_to_their_owners_personal_teams_with_balances_unchanged(before_teams):
    old, now = before_teams, timezone.now()
    users = {n: old.get_model("auth", "User").objects.create(username=n) for n in ("dana", "eve")}
    region = old.get_model("catalog", "Region").objects.create(slug="r", name="R")
    model = old.get_model("catalog", "GpuModel").objects.create(
        slug="l4", name="L4", vendor="nvidia", memory_gb=24, memory_reported_mib=23034,
        bandwidth_gbps=300, stack="cuda", compute_target="8.9",
    )  # fmt: skip
    period = old.get_model("catalog", "RentalPeriod").objects.create(
        slug="day", name="day", duration=timedelta(days=1)
    )
    node = old.get_model("catalog", "Node").objects.create(
        hostname="n1", region=region, gpu_model=model, telemetry_url="http://n1:9400/metrics",
        exporter="dcgm",
    )  # fmt: skip
    amounts = {"dana": ("30.00", "12.50"), "eve": ("40.00", None)}
    for name, user in users.items():
        quote = old.get_model("rentals", "Quote").objects.create(
            user=user, gpu_model=model, gpu_count=1, period=period, period_count=1,
            paid_from=now, paid_until=now + timedelta(days=1), total=amounts[name][0],
            currency="USD", valid_until=now + timedelta(minutes=15),
        )  # fmt: skip
        allocation = old.get_model("rentals", "Allocation").objects.create(
            user=user, quote=quote, gpu_model=model, node=node, gpu_count=1, period=period,
            paid_from=now, paid_until=now + timedelta(days=1), state="running",
        )  # fmt: skip
        ledger = old.get_model("rentals", "LedgerEntry")
        charge, refund = amounts[name]
        ledger.objects.create(user=user, allocation=allocation, kind="charge", amount=charge,
                              currency="USD", description="Booking", at=now)  # fmt: skip
        if refund:
            ledger.objects.create(user=user, allocation=allocation, kind="refund", amount=refund,
                                  currency="USD", description="Refund", at=now)  # fmt: skip
        old.get_model("rentals", "IdempotencyKey").objects.create(
            user=user, key=f"k-{name}", fingerprint="f", status_code=201, content_type="x",
            body=b"{}", created_at=now,
        )  # fmt: skip
        old.get_model("accounts", "ApiToken").objects.create(
            user=user, name="ci", key_hash=name * 16, hint="h", expires_at=now + timedelta(days=1),
            password_stamp="",
        )  # fmt: skip

    _migrate_to_latest()

    for name, user in users.items():
        team = Team.objects.get(personal_for_id=user.pk)
        assert Membership.objects.get(team=team).role == "owner"
        acting = acting_as(get_user_model().objects.get(pk=user.pk))
        assert acting.team == team
        assert selectors.allocation_list(acting=acting).count() == 1
        assert Quote.objects.get(user_id=user.pk).team == team
        assert IdempotencyKey.objects.get(user_id=user.pk).team == team
        assert ApiToken.objects.get(user_id=user.pk).team == team
        charge, refund = amounts[name]
        expected = Decimal(charge) - Decimal(refund or 0)
        assert selectors.ledger_balance(acting=acting) == expected


BEFORE_HOURLY_FLEET_SIZE = [("telemetry", "0006_samples_partitioned_by_day")]


@pytest.fixture
def before_hourly_fleet_size(transactional_db):
    yield from _models_at(BEFORE_HOURLY_FLEET_SIZE)


def test_every_rounds_fleet_size_folds_into_its_hour(before_hourly_fleet_size):
    sizes = before_hourly_fleet_size.get_model("telemetry", "FleetSize")
    ten = datetime(2026, 11, 2, 10, tzinfo=UTC)
    rounds = [(ten, 16, 16), (ten + timedelta(minutes=15), 24, 12),
              (ten + timedelta(minutes=59, seconds=59), 20, 20),
              (ten + timedelta(hours=1), 8, 7), (ten + timedelta(hours=3, minutes=30), 8, 8)]  # fmt: skip
    for at, gpus, reporting in rounds:
        sizes.objects.create(at=at, gpus=gpus, reporting=reporting)

    _migrate_to_latest()

    assert list(FleetSize.objects.order_by("at").values_list("at", "gpus", "reporting")) == [
        (ten, 24, 12), (ten + timedelta(hours=1), 8, 7), (ten + timedelta(hours=3), 8, 8),
    ]  # fmt: skip


BEFORE_SEALED_SECRETS = [("webhooks", "0001_initial")]


@pytest.fixture
def before_sealed_secrets(transactional_db):
    yield from _models_at(BEFORE_SEALED_SECRETS)


def test_plain_webhook_secrets_are_sealed(before_sealed_secrets):
    old = before_sealed_secrets
    user = old.get_model("auth", "User").objects.create(username="fay")
    team = old.get_model("accounts", "Team").objects.create(name="fay", personal_for=user)
    old.get_model("webhooks", "WebhookEndpoint").objects.create(
        team=team, created_by=user, url="https://hooks.example.com/in", events=["booking.created"],
        secret="whsec_plain",
    )  # fmt: skip

    _migrate_to_latest()

    sealed = WebhookEndpoint.objects.get().secret_sealed
    assert "whsec_plain" not in sealed and unseal(sealed) == "whsec_plain"
