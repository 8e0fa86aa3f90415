"""The demo's roles match the design: staff read and change nothing; prices are set by the
pricing account (and admins)."""

import pytest
from django.contrib.auth import get_user_model

from catalog.demo import seed_catalog, seed_users

pytestmark = pytest.mark.django_db


def test_demo_staff_cannot_set_prices_but_the_pricing_account_can():
    seed_catalog()
    seed_users(password="demo-password-123")
    users = {u.username: u for u in get_user_model().objects.all()}
    assert users["staff"].is_staff and not users["staff"].has_perm("catalog.change_prices")
    assert not users["staff"].has_perm("catalog.add_gpuprice")
    assert users["pricing"].has_perm("catalog.change_prices")
    assert users["admin"].has_perm("catalog.change_prices")
    assert not users["alice"].is_staff


def test_the_demo_fleet_has_a_fabric_group_that_books_as_a_cluster():
    from accounts.roles import acting_as
    from rentals.services import quote_create

    seed_catalog()
    seed_users(password="demo-password-123")
    alice = get_user_model().objects.get(username="alice")
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100-sxm", node_count=4, period="week", period_count=1
    )
    assert (quote.node_count, quote.gpu_count) == (4, 32)
