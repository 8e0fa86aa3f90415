"""Admin parts every app shares: records that are read in the admin, never written there,
and columns that read as the pages do (money with its currency, times with their zone)."""

from decimal import Decimal

from django.contrib import admin

from core.money import money_text
from core.templatetags.when import when


def when_column(field: str, description):
    """A time in the admin's time zone with the zone's name ("Dec. 5, 2026, 10 a.m. CET",
    UTC on hover), as every page shows times, rather than a bare local time."""

    @admin.display(description=description, ordering=field)
    def column(obj):
        return when(getattr(obj, field))

    column.__name__ = f"{field}_when"
    return column


def money_column(field: str, description, *, currency: str = "currency"):
    """An amount as money reads ("25.20 USD"), not as the column stores it ("25.2000")."""

    @admin.display(description=description, ordering=field)
    def column(obj):
        amount = getattr(obj, field)
        return "—" if amount is None else money_text(amount, _currency(obj, currency))

    column.__name__ = f"{field}_money"
    return column


def percent_column(field: str, description):
    """A rate stored as a fraction (0.2300) as a percentage ("23 %")."""

    @admin.display(description=description, ordering=field)
    def column(obj):
        rate = getattr(obj, field)
        return "—" if rate is None else f"{(Decimal(rate) * 100).normalize():f} %"

    column.__name__ = f"{field}_percent"
    return column


def _currency(obj, path: str) -> str:
    for part in path.split("__"):
        obj = getattr(obj, part)
    return obj


class ReadOnlyAdmin(admin.ModelAdmin):
    """Listed and searchable; written only by services (money, audit trails, telemetry)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False
