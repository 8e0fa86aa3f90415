"""Admin pricing safety: prices never take effect in the past, the fixed periods keep their
lengths in the database, rows are marked past/current/upcoming, and customers can read the
price history."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog.models import GpuPrice, PriceChange
from catalog.services import gpu_price_set
from core.errors import Invalid

pytestmark = pytest.mark.django_db


def test_a_price_cannot_be_back_dated_and_the_refusal_changes_nothing(catalog):
    before = GpuPrice.objects.count()
    with pytest.raises(Invalid) as error:
        gpu_price_set(
            gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("1.00"),
            effective_from=timezone.now() - timedelta(hours=1),
        )  # fmt: skip
    assert "never in the past" in str(error.value)
    assert GpuPrice.objects.count() == before and not PriceChange.objects.exists()


def test_the_admin_refuses_a_back_dated_price_with_a_field_error(catalog, admin_client):
    response = admin_client.post(
        "/admin/catalog/gpuprice/add/",
        {"gpu_model": catalog.l4.pk, "period": catalog.day.pk, "unit_price": "1.00",
         "effective_from_0": "2020-01-01", "effective_from_1": "00:00"},
    )  # fmt: skip
    assert response.status_code == 200
    assert "never in the past" in response.content.decode()


@pytest.mark.parametrize(("slug", "days"), [("day", 2), ("week", 6), ("month", 31)])
def test_day_week_and_month_keep_their_lengths_in_the_database(catalog, slug, days):
    period = getattr(catalog, slug)
    period.duration = timedelta(days=days)
    with pytest.raises(IntegrityError), transaction.atomic():
        period.save()


def test_rows_are_marked_past_current_and_upcoming(catalog, admin_client):
    gpu_price_set(gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("15.00"))
    gpu_price_set(
        gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("16.00"),
        effective_from=timezone.now() + timedelta(days=3),
    )  # fmt: skip
    page = admin_client.get(f"/admin/catalog/gpuprice/?gpu_model__id__exact={catalog.l4.pk}"
                            f"&period__id__exact={catalog.day.pk}").content.decode()  # fmt: skip
    assert page.count(">past<") == 1 and page.count(">current<") == 1
    assert page.count(">upcoming<") == 1
    later = (timezone.now() + timedelta(days=4)).strftime("%Y-%m-%d %H:%M")
    at = admin_client.get("/admin/catalog/gpuprice/at/", {"at": later}).content.decode()
    assert "16.00" in at and "15.00" not in at


def test_customers_read_the_price_history(catalog, api, client, alice):
    gpu_price_set(
        gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("14.00"),
        effective_from=timezone.now() + timedelta(days=1),
    )  # fmt: skip
    rows = api.get("/api/v1/gpu-models/l4/prices/").json()
    day = [(r["unit_price"], r["status"]) for r in rows if r["period"] == "day"]
    assert day == [("14.00", "upcoming"), ("13.20", "current")]
    assert api.get("/api/v1/gpu-models/nope/prices/").status_code == 404
    client.force_login(alice)
    page = client.get("/book/l4/").content.decode()
    assert "Price history" in page and "scheduled" in page and "in force" in page
