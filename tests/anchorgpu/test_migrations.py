"""Data from older layouts survives the migrations: API tokens from the project package to
accounts, polls, samples, rollups and flags from rentals to telemetry, stored idempotent
responses from JSON to the bytes the client saw, rows to their owners' personal teams, raw
samples into day partitions, every round's fleet size into its hour, and webhook secrets
sealed.

One database is taken through every old layout these tests start from, in the order the
graph allows (each later one is reached forward from the one before): at each, rows are
made with the models as they were there. It is then migrated to the latest once, and each
test reads what became of its own rows. Migrating the whole project forward takes about
20 s on two busy cores, once for the module rather than once for each test."""

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts.models import ApiToken, Membership, Team
from accounts.roles import acting_as
from core.sealed import unseal
from rentals import selectors
from rentals.models import IdempotencyKey, Quote
from telemetry.models import Flag, FleetSize, GpuHour, GpuRollup, GpuSample, Poll
from telemetry.partitions import partition_name, sample_partitions
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
BEFORE_TEAMS = [
    ("accounts", "0005_profile_and_sign_in_history"),
    ("rentals", "0006_period_duration_guard"),
    ("catalog", "0009_node_ssh_details"),  # before the catalog's words had a column each
]
BEFORE_PARTITIONS = [("telemetry", "0005_fleet_rollups")]
BEFORE_HOURLY_FLEET_SIZE = [("telemetry", "0006_samples_partitioned_by_day")]
BEFORE_SEALED_SECRETS = [("webhooks", "0001_initial")]

DAY = date(2025, 3, 10)  # long before the partitions' migration made any
NOON = datetime(2025, 3, 10, 12, tzinfo=UTC)
TEN = datetime(2026, 11, 2, 10, tzinfo=UTC)


def _tables():
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


# --- What each old layout is given ---------------------------------------------------------


def _old_layout_rows(old) -> dict:
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
    return {"token": token.pk, "gpu": gpu.pk}


AMOUNTS = {"dana": ("30.00", "12.50"), "eve": ("40.00", None)}


def _before_teams_rows(old) -> dict:
    now = timezone.now()
    users = {n: old.get_model("auth", "User").objects.create(username=n) for n in AMOUNTS}
    region = old.get_model("catalog", "Region").objects.create(slug="r2", name="R2")
    model = old.get_model("catalog", "GpuModel").objects.create(
        slug="l4", name="L4", vendor="nvidia", memory_gb=24, memory_reported_mib=23034,
        bandwidth_gbps=300, stack="cuda", compute_target="8.9",
    )  # fmt: skip
    period = old.get_model("catalog", "RentalPeriod").objects.create(
        slug="day", name="day", duration=timedelta(days=1)
    )
    node = old.get_model("catalog", "Node").objects.create(
        hostname="n2", region=region, gpu_model=model, telemetry_url="http://n2:9400/metrics",
        exporter="dcgm",
    )  # fmt: skip
    for name, user in users.items():
        quote = old.get_model("rentals", "Quote").objects.create(
            user=user, gpu_model=model, gpu_count=1, period=period, period_count=1,
            paid_from=now, paid_until=now + timedelta(days=1), total=AMOUNTS[name][0],
            currency="USD", valid_until=now + timedelta(minutes=15),
        )  # fmt: skip
        allocation = old.get_model("rentals", "Allocation").objects.create(
            user=user, quote=quote, gpu_model=model, node=node, gpu_count=1, period=period,
            paid_from=now, paid_until=now + timedelta(days=1), state="running",
        )  # fmt: skip
        ledger = old.get_model("rentals", "LedgerEntry")
        charge, refund = AMOUNTS[name]
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
    return {name: user.pk for name, user in users.items()}


def _before_partitions_rows(old) -> dict:
    gpu = old.get_model("catalog", "Gpu").objects.get(uuid="GPU-1")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO telemetry_gpusample (gpu_id, at, utilization) VALUES"
            " (%(g)s, %(a)s, 10), (%(g)s, %(b)s, 20) RETURNING id",
            {"g": gpu.pk, "a": NOON, "b": NOON + timedelta(days=1)},
        )
        ids = sorted(i for (i,) in cursor.fetchall())
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'telemetry_gpusample'")
        (relkind,) = cursor.fetchone()
    return {"ids": ids, "relkind": relkind}


ROUNDS = [(TEN, 16, 16), (TEN + timedelta(minutes=15), 24, 12),
          (TEN + timedelta(minutes=59, seconds=59), 20, 20),
          (TEN + timedelta(hours=1), 8, 7), (TEN + timedelta(hours=3, minutes=30), 8, 8)]  # fmt: skip


def _before_hourly_fleet_size_rows(old) -> None:
    sizes = old.get_model("telemetry", "FleetSize")
    for at, gpus, reporting in ROUNDS:
        sizes.objects.create(at=at, gpus=gpus, reporting=reporting)


def _before_sealed_secrets_rows(old) -> int:
    user = old.get_model("auth", "User").objects.create(username="fay")
    team = old.get_model("accounts", "Team").objects.create(name="fay", personal_for=user)
    return old.get_model("webhooks", "WebhookEndpoint").objects.create(
        team=team, created_by=user, url="https://hooks.example.com/in", events=["booking.created"],
        secret="whsec_plain",
    ).pk  # fmt: skip


GIVEN = (
    (OLD_LAYOUT, _old_layout_rows),
    (BEFORE_TEAMS, _before_teams_rows),
    (BEFORE_PARTITIONS, _before_partitions_rows),
    (BEFORE_HOURLY_FLEET_SIZE, _before_hourly_fleet_size_rows),
    (BEFORE_SEALED_SECRETS, _before_sealed_secrets_rows),
)


@pytest.fixture(scope="module")
def migrated(django_db_setup, django_db_blocker):
    """What each old layout was given, by its targets, once a database of its own has been
    taken through all of them and migrated to the latest (tests/dbtemplate.py); afterwards
    the tests read it, and the process goes back to its own test database, untouched."""
    with django_db_blocker.unblock(), dbtemplate.empty_database():
        given = {}
        for targets, rows in GIVEN:
            executor = MigrationExecutor(connection)
            executor.migrate(targets)
            executor.loader.build_graph()
            old = executor.loader.project_state([t for t in targets if t[1]]).apps
            given[rows] = rows(old)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        yield given


# --- What became of them -------------------------------------------------------------------


@pytest.mark.django_db
def test_old_layout_rows_survive_the_move(migrated):
    given = migrated[_old_layout_rows]
    tables = _tables()
    assert {"telemetry_gpusample", "telemetry_poll", "accounts_apitoken"} <= tables
    assert not {"rentals_gpusample", "rentals_flag", "anchorgpu_apitoken"} & tables
    token = ApiToken.objects.get(user__username="carol")
    assert token.pk == given["token"] and token.hint == "agpu_abcd"
    sample = GpuSample.objects.exclude(utilization__in=(10, 20)).get()  # not the partitions'
    assert (sample.gpu_id, sample.utilization, sample.energy_j) == (given["gpu"], 87.5, 1.5e9)
    assert Poll.objects.get().duration_ms == 12
    assert GpuRollup.objects.get().samples == 240
    # …and its hour a GPU hour of sums (an average × its samples).
    hour = GpuHour.objects.get()
    assert (hour.gpu_id, hour.samples, hour.util_sum, hour.util_samples, hour.power_samples) == (
        given["gpu"], 240, 80.0 * 240, 240, 0,
    )  # fmt: skip
    assert Flag.objects.get(closed_at__isnull=True).kind == "hot"
    ok, refused = (
        IdempotencyKey.objects.get(key="k-ok"),
        IdempotencyKey.objects.get(key="k-refused"),
    )
    assert json.loads(bytes(ok.body)) == {"id": "x"} and ok.content_type == "application/json"
    assert json.loads(bytes(refused.body))["code"] == "no_capacity"
    assert refused.content_type == "application/problem+json"


@pytest.mark.django_db
def test_rows_move_to_their_owners_personal_teams_with_balances_unchanged(migrated):
    for name, user_pk in migrated[_before_teams_rows].items():
        team = Team.objects.get(personal_for_id=user_pk)
        assert Membership.objects.get(team=team).role == "owner"
        acting = acting_as(get_user_model().objects.get(pk=user_pk))
        assert acting.team == team
        assert selectors.allocation_list(acting=acting).count() == 1
        assert Quote.objects.get(user_id=user_pk).team == team
        assert IdempotencyKey.objects.get(user_id=user_pk).team == team
        assert ApiToken.objects.get(user_id=user_pk).team == team
        charge, refund = AMOUNTS[name]
        expected = Decimal(charge) - Decimal(refund or 0)
        assert selectors.ledger_summary(acting=acting).balance == expected


@pytest.mark.django_db
def test_the_migration_moves_the_old_tables_rows_into_day_partitions(migrated):
    given = migrated[_before_partitions_rows]
    old_ids = given["ids"]
    assert given["relkind"] == "r"
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'telemetry_gpusample'")
        assert cursor.fetchone()[0] == "p"
        cursor.execute(
            "SELECT id, tableoid::regclass::text FROM telemetry_gpusample WHERE id = ANY(%s)",
            [old_ids],
        )
        assert dict(cursor.fetchall()) == {
            old_ids[0]: partition_name(DAY),
            old_ids[1]: partition_name(DAY + timedelta(days=1)),
        }
    moved = GpuSample.objects.filter(pk__in=old_ids).order_by("at")
    assert list(moved.values_list("utilization", flat=True)) == [10.0, 20.0]
    new = GpuSample.objects.create(gpu=moved[0].gpu, at=NOON, utilization=30.0)
    assert new.pk > old_ids[-1]  # the sequence continues past the moved rows
    assert datetime.now(UTC).date() in sample_partitions()


@pytest.mark.django_db
def test_every_rounds_fleet_size_folds_into_its_hour(migrated):
    assert list(FleetSize.objects.order_by("at").values_list("at", "gpus", "reporting")) == [
        (TEN, 24, 12), (TEN + timedelta(hours=1), 8, 7), (TEN + timedelta(hours=3), 8, 8),
    ]  # fmt: skip


@pytest.mark.django_db
def test_plain_webhook_secrets_are_sealed(migrated):
    sealed = WebhookEndpoint.objects.get(pk=migrated[_before_sealed_secrets_rows]).secret_sealed
    assert "whsec_plain" not in sealed and unseal(sealed) == "whsec_plain"
