"""The admin reads like the product: one "Accounts" section, the site's icon,
times with their time zone, and money as money."""

import re
import zoneinfo
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from catalog.services import gpu_price_set
from tests.support.booking import book
from tests.support.factories.invoices import document

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123456")
    return user


def test_the_admin_has_one_accounts_section_and_the_site_s_icon(catalog, client, superuser):
    client.force_login(superuser)

    index = client.get("/admin/").content.decode()

    sections = re.findall(r'class="section"[^>]*>([^<]+)</a>', index)
    assert sections.count("Accounts") == 1, sections
    assert 'href="/admin/accounts/emailaddressrecord/"' in index  # allauth's addresses, here
    assert "/admin/account/" not in index
    assert '<link rel="icon" href="/static/img/anchor.svg"' in index
    login = client.get("/admin/login/")  # the signed-in are sent on, the icon is there too
    assert login.status_code == 302
    client.logout()
    assert '<link rel="icon"' in client.get("/admin/login/").content.decode()
    client.force_login(superuser)
    addresses = client.get("/admin/accounts/emailaddressrecord/")
    assert addresses.status_code == 200 and "root@example.com" not in addresses.content.decode()


def test_the_price_list_shows_times_with_their_time_zone(catalog, client, superuser):
    at = timezone.now().replace(microsecond=0) + timedelta(days=3)
    gpu_price_set(
        gpu_model=catalog.h100, period=catalog.week, unit_price=Decimal("400.00"),
        effective_from=at,
    )  # fmt: skip
    client.force_login(superuser)
    session = client.session  # as a sign-in leaves it (accounts.middleware)
    session["preferred_time_zone"] = "Europe/Warsaw"
    session.save()

    page = client.get("/admin/catalog/gpuprice/").content.decode()

    zone = at.astimezone(zoneinfo.ZoneInfo("Europe/Warsaw")).tzname()  # CET or CEST
    row = re.search(
        r'<time datetime="' + re.escape(at.isoformat()) + r'"[^>]*>([^<]+)</time>', page
    )
    assert row is not None, "the scheduled price's time is not shown as a time"
    assert row.group(1).endswith(f" {zone}")
    assert "400.00 USD" in page
    at_page = client.get("/admin/catalog/gpuprice/at/").content.decode()
    assert f" {zone}</time>" in at_page and " UTC</td>" not in at_page


def test_the_invoice_admin_prints_money_and_rates_as_people_read_them(
    catalog, alice, client, superuser
):
    allocation = book(alice, model="h100", count=1, period="week")
    invoice = document(allocation, currency="USD", lines=((2, "12.60"),))  # 25.20 + 5.80 VAT
    client.force_login(superuser)

    listing = client.get("/admin/invoices/invoice/").content.decode()
    detail = client.get(f"/admin/invoices/invoice/{invoice.pk}/change/").content.decode()

    for page in (listing, detail):  # the list shows net and gross; VAT is on the invoice
        assert "25.20 USD" in page and "31.00 USD" in page
        assert "25.2000" not in page and "5.8000" not in page
    assert "5.80 USD" in detail
    assert "12.60 USD" in detail and "23 %" in detail and "0.2300" not in detail
