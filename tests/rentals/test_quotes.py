from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.roles import acting_as
from catalog.services import gpu_price_set
from core.errors import Invalid
from core.money import Money
from rentals.errors import NoCapacity
from rentals.models import Quote, QuoteLine
from rentals.services import quote_create
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def test_quote_has_gpu_line_option_lines_and_exact_total(catalog, alice):
    quote = quote_create(acting=acting_as(alice), gpu_model="h100", gpu_count=4, period="week", period_count=2,
        options=[{"option": "nvme-scratch", "quantity": 3}, {"option": "custom-image", "quantity": 1}],
    )  # fmt: skip

    lines = list(quote.lines.order_by("position"))
    assert [(line.kind, line.quantity, line.unit_price, line.amount) for line in lines] == [
        ("gpu", 8, Decimal("362.88"), Decimal("2903.04")),
        ("option", 6, Decimal("25.00"), Decimal("150.00")),
        ("option", 1, Decimal("150.00"), Decimal("150.00")),
    ]
    assert quote.net_total == Decimal("3203.04") == sum(line.amount for line in lines)
    assert (quote.vat_rate, quote.vat_total) == (Decimal("0.23"), Decimal("736.70"))
    assert quote.total == Decimal("3939.74") == quote.net_total + quote.vat_total
    assert quote.paid_until - quote.paid_from == timedelta(days=14)
    assert quote.valid_until - quote.created_at < timedelta(minutes=15, seconds=1)


def test_quote_is_a_snapshot_that_price_changes_do_not_touch(catalog, alice):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="week", period_count=1
    )

    gpu_price_set(gpu_model=catalog.h100, period=catalog.week, unit_price=Decimal("999.00"))

    quote.refresh_from_db()
    assert quote.net_total == Decimal("362.88")
    assert quote.lines.get().unit_price == Decimal("362.88")
    new = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="week", period_count=1
    )
    assert new.net_total == Decimal("999.00")


def test_scheduled_price_applies_only_from_its_time(catalog, alice):
    gpu_price_set(
        gpu_model=catalog.h100, period=catalog.week, unit_price=Decimal("1.00"),
        effective_from=timezone.now() + timedelta(days=1),
    )  # fmt: skip
    assert quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="week", period_count=1
    ).net_total == Decimal("362.88")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"gpu_model": "nope"}, "gpu_model"),
        ({"gpu_count": 0}, "gpu_count"),
        ({"gpu_count": 9}, "gpu_count"),
        ({"period": "fortnight"}, "period"),
        ({"period_count": 0}, "period_count"),
        ({"period_count": 53}, "period_count"),
        ({"starts_at": datetime(2020, 1, 1, tzinfo=UTC)}, "starts_at"),
        ({"options": [{"option": "public-ipv4", "quantity": 1}], "gpu_model": "l4"}, "options.0"),
        ({"options": [{"option": "nvme-scratch", "quantity": 17}]}, "options.0"),
        ({"options": [{"option": "ghost", "quantity": 1}]}, "options.0"),
    ],
)
def test_bad_input_is_a_field_error_and_stores_nothing(catalog, alice, changes, field):
    request = {"gpu_model": "h100", "gpu_count": 1, "period": "week", "period_count": 1} | changes
    with pytest.raises(Invalid) as error:
        quote_create(acting=acting_as(alice), **request)
    assert field in error.value.errors
    assert Quote.objects.count() == 0
    assert QuoteLine.objects.count() == 0


def test_inactive_model_is_refused(catalog, alice):
    catalog.l4.is_active = False
    catalog.l4.save()
    with pytest.raises(Invalid) as error:
        quote_create(
            acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day", period_count=1
        )
    assert "gpu_model" in error.value.errors


def test_no_capacity_answers_with_the_earliest_start(catalog, alice, bob):
    now = timezone.now()
    first = book(bob, model="l4", count=4, period="day", periods=2, now=now)

    with pytest.raises(NoCapacity) as error:
        quote_create(
            acting=acting_as(alice),
            gpu_model="l4",
            gpu_count=2,
            period="day",
            period_count=1,
            now=now,
        )

    assert error.value.earliest_start == first.paid_until
    later = quote_create(acting=acting_as(alice), gpu_model="l4", gpu_count=2, period="day", period_count=1,
        starts_at=error.value.earliest_start, now=now,
    )  # fmt: skip
    assert later.paid_from == first.paid_until


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(min_value=1, max_value=8),
    periods=st.integers(min_value=1, max_value=52),
    period=st.sampled_from(["day", "week", "month"]),
    scratch=st.integers(min_value=0, max_value=16),
)
def test_total_is_the_sum_of_lines_and_scales_exactly(
    catalog, alice, count, periods, period, scratch
):
    options = [{"option": "nvme-scratch", "quantity": scratch}] if scratch else []
    quote = quote_create(acting=acting_as(alice), gpu_model="h100", gpu_count=count, period=period, period_count=periods,
        options=options,
    )  # fmt: skip
    lines = list(quote.lines.all())
    assert quote.net_total == sum(line.amount for line in lines)
    assert quote.vat_total == sum(line.vat for line in lines)
    assert quote.total == quote.net_total + quote.vat_total
    assert all(isinstance(line.amount, Decimal) for line in lines)
    gpu = next(line for line in lines if line.kind == "gpu")
    assert gpu.amount == gpu.unit_price * count * periods
    days = {"day": 1, "week": 7, "month": 30}[period]
    assert quote.paid_until - quote.paid_from == timedelta(days=days * periods)


ZONES = ["Europe/Warsaw", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "UTC"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    offset=st.integers(min_value=60, max_value=300 * 24 * 3600),
    zone=st.sampled_from(ZONES),
    period=st.sampled_from([("week", 604800), ("month", 2592000)]),
)
def test_paid_period_is_exact_from_any_start_in_any_zone(catalog, alice, offset, zone, period):
    slug, seconds = period
    start = (timezone.now() + timedelta(seconds=offset)).astimezone(ZoneInfo(zone))
    quote = quote_create(
        acting=acting_as(alice),
        gpu_model="mi300x",
        gpu_count=1,
        period=slug,
        period_count=1,
        starts_at=start,
    )
    assert (quote.paid_until - quote.paid_from).total_seconds() == seconds
    assert quote.paid_from == start
    assert quote.paid_from.utcoffset() == timedelta(0)


def test_money_refuses_floats_and_mixed_currencies():
    with pytest.raises(TypeError):
        Money(1.5, "USD")
    with pytest.raises(ValueError):
        Money(Decimal("1"), "USD") + Money(Decimal("1"), "EUR")
    assert Money(Decimal("1.005"), "USD").amount == Decimal("1.00")
    assert (Money(Decimal("2.50"), "USD") * 3).amount == Decimal("7.50")
