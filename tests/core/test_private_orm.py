"""The two places where the project builds ORM objects by hand and so leans on Django's
internals (checked against Django 5.2): `core.db.prefetched`, which fills a relation's
prefetch cache, and rows written with SQL rebuilt as if read back
(`rentals.services.bookings._as_written`, `_state.adding` and `_state.db`). A Django upgrade
that changes either fails here, by name, before it fails a customer's booking."""

import django
import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.db import prefetched
from rentals.models import Notice, Quote
from rentals.services.bookings import _as_written
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def test_the_django_these_were_checked_against():
    assert django.VERSION[:2] == (5, 2), "check prefetched() and _as_written() against it"


def test_prefetched_answers_the_relation_without_a_query_and_a_filter_still_reads(
    catalog, alice, django_assert_num_queries
):
    quote_id = book(alice, model="h100", count=1, period="week").quote_id
    lines = list(Quote.objects.get(pk=quote_id).lines.order_by("position"))
    quote = Quote.objects.get(pk=quote_id)

    prefetched(quote, "lines", lines)

    with django_assert_num_queries(0):
        assert list(quote.lines.all()) == lines
        assert quote.lines.count() == len(lines)
    with django_assert_num_queries(1):  # anything past .all() is a query of its own
        assert list(quote.lines.filter(pk=lines[0].pk)) == [lines[0]]


def test_a_row_written_with_sql_and_rebuilt_reads_as_a_stored_row(catalog, alice):
    allocation = book(alice, model="h100", count=1, period="week")
    stored = Notice.objects.filter(allocation=allocation).latest("id")
    fields = {f.attname: getattr(stored, f.attname) for f in Notice._meta.concrete_fields}

    rebuilt = _as_written(Notice, **fields)

    assert (rebuilt._state.adding, rebuilt._state.db) == (False, connection.alias)
    rebuilt.validate_unique()  # a new object with this id would be refused as a duplicate
    with pytest.raises(ValidationError):
        Notice(**fields).validate_unique()
    with CaptureQueriesContext(connection) as queries:
        rebuilt.attempts = 7
        rebuilt.save(update_fields=["attempts"])
    assert [q["sql"].split()[0] for q in queries] == ["UPDATE"]
    assert Notice.objects.get(pk=stored.pk).attempts == 7
    assert rebuilt.allocation == allocation  # relations read through the recorded database
