"""The clean slate between transactional tests (tests/dbtemplate.py): whatever a test wrote,
`rows_restore` leaves the database as the template left it, row for row, and a world's
snapshot comes back whole, with its ids."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.utils import timezone
from psycopg import sql

from audit.models import AllocationAudit
from catalog.models import Gpu
from glossary.models import Term
from rentals.models import Allocation
from telemetry.models import GpuSample
from tests import dbtemplate
from tests.support.booking import book
from tests.support.factories.accounts import person
from tests.support.factories.catalog import catalog_setup

pytestmark = pytest.mark.django_db(transaction=True)


def _rows(cursor) -> dict[str, list[tuple]]:
    """Every row of the tables a flush empties, in key order, through `cursor` (ours or the
    template's)."""
    rows = {}
    for table in connection.introspection.django_table_names(only_existing=True):
        cursor.execute(sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(table)))
        rows[table] = cursor.fetchall()
    return rows


def _ours() -> dict[str, list[tuple]]:
    with connection.cursor() as cursor:
        return _rows(cursor.cursor)


def _template() -> dict[str, list[tuple]]:
    template = dbtemplate.PREFIX + dbtemplate.digest()
    with dbtemplate._server(connection.settings_dict, template) as server:
        return _rows(server.cursor())


def _dirty():
    """Rows in most apps' tables, an audit row (its table refuses deletion), a raw sample in
    a day partition, and the migrations' own rows changed and removed."""
    catalog_setup()
    allocation = book(person("alice", "pw-alice-123456"), model="h100", count=1, period="day")
    assert AllocationAudit.objects.filter(pgh_obj_id=allocation.pk).exists()
    GpuSample.objects.create(gpu=Gpu.objects.first(), at=timezone.now(), utilization=50.0)
    Term.objects.update(term="changed")
    Permission.objects.filter(codename="add_gpuprice").delete()
    return allocation


def test_what_a_test_wrote_is_gone_and_the_migrations_rows_are_back():
    template = _template()
    assert template["glossary_term"] and template["auth_permission"]
    _dirty()
    assert _ours() != template

    assert dbtemplate.rows_restore() is True

    assert _ours() == template  # every table, row for row
    assert Permission.objects.filter(codename="add_gpuprice").exists()
    assert not Term.objects.filter(term="changed").exists()


def test_a_worlds_snapshot_comes_back_with_its_ids():
    allocation = _dirty()
    world, rows = _ours(), dbtemplate.rows_snapshot()
    book(allocation.user, model="l4", count=1, period="day",
         starts_at=timezone.now() + timedelta(days=3))  # fmt: skip
    assert dbtemplate.rows_restore() is True
    assert not Allocation.objects.exists()

    assert dbtemplate.rows_restore(rows=rows) is True

    assert _ours() == world
    assert list(Allocation.objects.values_list("pk", flat=True)) == [allocation.pk]
    assert AllocationAudit.objects.filter(pgh_obj_id=allocation.pk).exists()
