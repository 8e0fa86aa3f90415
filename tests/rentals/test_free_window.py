""" "Is this GPU free in this window" is one rule, written once for SQL (`rentals.sql.holdings.gpu_free`)
and once for the ORM (`rentals.selectors.holdings.holdings_overlapping`): both give the same GPUs,
at the edges of a holding too."""

from datetime import timedelta

import pytest
from django.db import connection
from psycopg.sql import SQL, Identifier, Placeholder

from catalog.models import Gpu
from core.db import db_now
from rentals.models import AllocationGpu
from rentals.selectors.holdings import holdings_at, holdings_overlapping
from rentals.sql.holdings import gpu_free
from tests.support.booking import book

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)
TICK = timedelta(microseconds=1)

_FREE_GPUS = (
    SQL("SELECT g.id FROM catalog_gpu g WHERE {} ORDER BY g.id")
    .format(gpu_free(Identifier("g", "id"), starts=Placeholder("starts"), ends=Placeholder("ends")))
    .as_string()
)


def _free_by_sql(starts, ends) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(_FREE_GPUS, {"starts": starts, "ends": ends})
        return [pk for (pk,) in cursor.fetchall()]


def _free_by_orm(starts, ends) -> list[int]:
    held = holdings_overlapping(starts_at=starts, ends_at=ends).values("gpu_id")
    return list(Gpu.objects.exclude(pk__in=held).order_by("pk").values_list("pk", flat=True))


def test_the_sql_clause_and_the_orm_agree_on_every_window(catalog, alice):
    now = db_now()
    first = book(alice, model="h100", count=3, period="day", starts_at=now + DAY)
    book(alice, model="h100", count=8, period="day", starts_at=now + 3 * DAY)
    book(alice, model="h100", count=2, period="day", starts_at=now + 3 * DAY)
    released = book(alice, model="l4", count=1, period="day", starts_at=now + DAY)
    AllocationGpu.objects.filter(allocation=released).update(released=True)
    edges = sorted({edge for h in AllocationGpu.objects.all() for edge in (h.starts_at, h.ends_at)})
    instants = sorted({t + d for t in edges for d in (-TICK, timedelta(0), TICK)})
    for starts in instants:
        for ends in [t for t in instants if t > starts][:6]:
            assert _free_by_sql(starts, ends) == _free_by_orm(starts, ends), (starts, ends)
    # A window that ends as a holding starts, or starts as it ends, leaves its GPUs free.
    held = set(AllocationGpu.objects.filter(allocation=first).values_list("gpu_id", flat=True))
    assert held <= set(_free_by_sql(now, first.paid_from))
    assert held <= set(_free_by_sql(first.paid_until, first.paid_until + DAY))
    assert not held & set(_free_by_sql(first.paid_from, first.paid_from + TICK))
    released_gpus = set(
        AllocationGpu.objects.filter(allocation=released).values_list("gpu_id", flat=True)
    )
    assert released_gpus <= set(_free_by_sql(released.paid_from, released.paid_until))


def test_an_instant_is_held_from_a_holdings_start_until_just_before_its_end(catalog, alice):
    allocation = book(alice, model="h100", count=1, period="day", starts_at=db_now() + DAY)
    (holding,) = AllocationGpu.objects.filter(allocation=allocation)
    at = holding.starts_at
    assert list(holdings_at(at - TICK)) == []
    assert list(holdings_at(at)) == [holding]
    assert list(holdings_at(holding.ends_at - TICK)) == [holding]
    assert list(holdings_at(holding.ends_at)) == []
