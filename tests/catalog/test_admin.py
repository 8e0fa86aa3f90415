from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import Gpu, GpuPrice, Node, PriceChange, RentalPeriod
from rentals.services import quote_create

pytestmark = pytest.mark.django_db

CSV = """hostname,region,gpu_model,telemetry_url,exporter,gpu_ids
n1,pl-waw,h100,http://n1:9400/metrics,dcgm,GPU-a;GPU-b
n2,pl-waw,mi300x,http://n2:5000/metrics,amd,S1;S2;S3
"""


@pytest.fixture
def pricer(django_user_model):
    user = django_user_model.objects.create_user("pricer", password="x", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="change_prices"),
        Permission.objects.get(codename="add_gpuprice"),
        Permission.objects.get(codename="view_gpuprice"),
        Permission.objects.get(codename="view_gpumodel"),
    )
    return user


def test_price_change_in_admin_is_a_new_row_with_who_and_when(catalog, client, pricer, alice):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="week", period_count=1
    )
    client.force_login(pricer)
    response = client.post(
        "/admin/catalog/gpuprice/add/",
        {"gpu_model": catalog.h100.pk, "period": catalog.week.pk, "unit_price": "400.00"},
    )
    assert response.status_code == 302, response.content[:500]
    assert GpuPrice.objects.filter(gpu_model=catalog.h100, period=catalog.week).count() == 2
    change = PriceChange.objects.get()
    assert (change.user, change.old_price, change.new_price) == (pricer, "362.88", "400.00 USD")
    quote.refresh_from_db()
    assert quote.net_total == Decimal("362.88")
    page = client.get(f"/admin/catalog/gpumodel/{catalog.h100.pk}/change/")
    assert b"400.00 USD" in page.content and b"362.88 USD" in page.content  # read as money


def test_a_price_scheduled_with_the_date_and_time_pickers(catalog, client, pricer):
    client.force_login(pricer)
    form = client.get("/admin/catalog/gpuprice/add/").content.decode()
    assert 'name="effective_from_0"' in form and "vDateField" in form  # the admin's pickers
    at = timezone.localtime(timezone.now() + timedelta(days=3))
    response = client.post(
        "/admin/catalog/gpuprice/add/",
        {"gpu_model": catalog.h100.pk, "period": catalog.week.pk, "unit_price": "410.00",
         "effective_from_0": f"{at:%Y-%m-%d}", "effective_from_1": f"{at:%H:%M:%S}"},
    )  # fmt: skip
    assert response.status_code == 302, response.content[:500]
    scheduled = GpuPrice.objects.get(unit_price=Decimal("410.00"))
    assert abs(scheduled.effective_from - at) < timedelta(seconds=1)
    listed = client.get("/admin/catalog/gpuprice/").content.decode().replace("\xa0", " ")
    assert "410.00 USD" in listed


def test_staff_without_the_price_permission_cannot_add_prices(catalog, client, django_user_model):
    user = django_user_model.objects.create_user("clerk", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_gpuprice"))
    client.force_login(user)
    response = client.post(
        "/admin/catalog/gpuprice/add/",
        {"gpu_model": catalog.h100.pk, "period": catalog.week.pk, "unit_price": "1.00"},
    )
    assert response.status_code == 403
    assert GpuPrice.objects.filter(unit_price=Decimal("1.00")).count() == 0


def test_import_fleet_command(catalog, tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text(CSV)
    out = StringIO()
    call_command("import_fleet", str(path), stdout=out)
    assert "2 nodes created" in out.getvalue()
    assert list(Node.objects.get(hostname="n2").gpus.values_list("uuid", flat=True)) == [
        "S1",
        "S2",
        "S3",
    ]
    call_command("import_fleet", str(path), stdout=out)
    assert Gpu.objects.filter(node__hostname__in=["n1", "n2"]).count() == 5


def test_import_fleet_is_all_or_nothing_with_line_numbers(catalog, tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text(CSV + "n3,mars,h100,http://n3/metrics,dcgm,GPU-c\n")
    with pytest.raises(CommandError, match="line 4: unknown region 'mars'"):
        call_command("import_fleet", str(path))
    assert not Node.objects.filter(hostname__in=["n1", "n2", "n3"]).exists()


def test_import_fleet_in_the_admin(catalog, admin_client):
    upload = SimpleUploadedFile("fleet.csv", CSV.encode())
    response = admin_client.post("/admin/catalog/node/import/", {"file": upload})
    assert response.status_code == 302
    assert Node.objects.filter(hostname__in=["n1", "n2"]).count() == 2


def test_a_period_in_use_keeps_its_duration(catalog, alice, admin_client):
    from datetime import timedelta

    from django.db import IntegrityError, transaction

    quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="week", period_count=1
    )
    catalog.week.duration = timedelta(days=6)
    with pytest.raises(IntegrityError), transaction.atomic():
        catalog.week.save()
    page = admin_client.get(f"/admin/catalog/rentalperiod/{catalog.week.pk}/change/")
    assert b'name="duration"' not in page.content  # read-only in the admin
    hour = RentalPeriod.objects.create(
        slug="fortnight", name_en="fortnight", duration=timedelta(days=14)
    )
    hour.duration = timedelta(days=15)
    hour.save()  # unused periods other than day, week and month may still change
