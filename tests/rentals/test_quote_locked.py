"""The booking reads its quote with a hand-written statement (`rentals.sql.booking.
QUOTE_LOCKED`): the instances it builds equal what the ORM's `select_related` reads."""

import pytest
from django.db import transaction

from accounts.roles import acting_as
from catalog.models import Region
from rentals.errors import QuoteMissing, QuoteUsed
from rentals.models import Quote
from rentals.services import quote_create
from rentals.services.bookings import _quote_locked
from tests.support.booking import book

pytestmark = pytest.mark.django_db

RELATED = ["gpu_model", "period", "team", "region"]


def _fields(instance):
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


@pytest.mark.parametrize("in_region", [False, True])
def test_the_locked_quote_and_its_rows_equal_the_orms(catalog, alice, in_region):
    acting = acting_as(alice)
    region = Region.objects.order_by("pk").first().slug if in_region else None
    quote = quote_create(
        acting=acting, gpu_model="h100", gpu_count=1, period="day", period_count=1, region=region
    )
    expected = Quote.objects.select_related(*RELATED).get(pk=quote.pk)
    with transaction.atomic():
        locked = _quote_locked(acting, quote.pk)
    assert _fields(locked) == _fields(expected)
    for name in RELATED:
        assert Quote._meta.get_field(name).is_cached(locked)  # no statement to read it
        ours, theirs = getattr(locked, name), getattr(expected, name)
        assert (ours and _fields(ours)) == (theirs and _fields(theirs))
    assert (locked.booked, locked.unverified) == (False, False)
    assert locked.region_id == (locked.region.pk if in_region else None)


def test_a_booked_quote_and_another_teams_are_refused(catalog, alice, bob):
    booked = book(alice, period="day")
    with pytest.raises(QuoteUsed), transaction.atomic():
        _quote_locked(acting_as(alice), booked.quote_id)
    with pytest.raises(QuoteMissing), transaction.atomic():
        _quote_locked(acting_as(bob), booked.quote_id)
