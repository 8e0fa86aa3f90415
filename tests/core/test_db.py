"""A retried transaction runs again whole: nothing of a failed attempt survives, and a nested
retried function hands the retry to the outermost one."""

import pytest
from django.db import connection, router

from catalog.models import Region
from core.db import ATTEMPTS, Retry, reads_db, reporting_reads, retried_transaction
from core.errors import Conflict
from telemetry.models import FleetRollup

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lost_race_reruns_the_whole_transaction_from_the_outermost_function():
    calls = {"outer": 0, "inner": 0}

    @retried_transaction
    def inner():
        calls["inner"] += 1
        if calls["inner"] == 1:
            raise Retry(Conflict("taken"))
        return Region.objects.create(slug="inner", name_en="inner")

    @retried_transaction
    def outer():
        calls["outer"] += 1
        Region.objects.create(slug=f"outer-{calls['outer']}", name_en="outer")
        return inner()

    outer()
    assert calls == {"outer": 2, "inner": 2}
    # The first attempt's outer write went with it: the whole transaction ran again.
    assert sorted(Region.objects.values_list("slug", flat=True)) == ["inner", "outer-2"]


def test_the_last_attempt_raises_the_refusal_and_leaves_nothing():
    @retried_transaction
    def always_loses():
        Region.objects.create(slug=f"r{Region.objects.count()}", name_en="r")
        raise Retry(Conflict("taken"))

    with pytest.raises(Conflict):
        always_loses()
    assert Region.objects.count() == 0
    assert ATTEMPTS > 1


def test_reports_read_the_reporting_database_and_everything_writes_the_primary(settings):
    settings.REPORTING_DATABASE = "reporting"
    assert router.db_for_read(FleetRollup) == "default"
    with reporting_reads():
        assert router.db_for_read(FleetRollup) == "reporting"
        assert router.db_for_write(FleetRollup) == "default"
        with reporting_reads():
            pass
        assert reads_db() == "reporting"  # leaving a nested block keeps the outer one's
    assert reads_db() == router.db_for_read(FleetRollup) == "default"
    assert router.allow_migrate("reporting", "telemetry") is False


def test_our_connections_run_without_postgres_jit():
    # Its compiling cost the dashboard's range sums 10-25 ms a statement (anchorgpu.settings).
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone() == ("off",)
