"""Admin parts every app shares: records that are read in the admin, never written there,
and columns that read as the pages do (money with its currency, times with their zone)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from core.money import money_text
from core.templatetags.when import when

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

    # The stubs' admin classes are generic in their models; Django's are not subscriptable
    # at run time. These bases serve any model.
    _ModelAdmin = admin.ModelAdmin[Any]
    _TabularInline = admin.TabularInline[Any, Any]
else:
    _ModelAdmin, _TabularInline = admin.ModelAdmin, admin.TabularInline

Column = Callable[[Any], str]  # a column of any model's admin


def when_column(field: str, description: StrOrPromise) -> Column:
    """A time in the admin's time zone with the zone's name ("Dec. 5, 2026, 10 a.m. CET",
    UTC on hover), as every page shows times, rather than a bare local time."""

    @admin.display(description=description, ordering=field)
    def column(obj: Model) -> str:
        moment: datetime | None = getattr(obj, field)
        return when(moment)

    column.__name__ = f"{field}_when"
    return column


def money_column(field: str, description: StrOrPromise, *, currency: str = "currency") -> Column:
    """An amount as money reads ("25.20 USD"), not as the column stores it ("25.2000")."""

    @admin.display(description=description, ordering=field)
    def column(obj: Model) -> str:
        amount = getattr(obj, field)
        return "—" if amount is None else money_text(amount, _currency(obj, currency))

    column.__name__ = f"{field}_money"
    return column


def percent_column(field: str, description: StrOrPromise) -> Column:
    """A rate stored as a fraction (0.2300) as a percentage ("23 %")."""

    @admin.display(description=description, ordering=field)
    def column(obj: Model) -> str:
        rate = getattr(obj, field)
        return "—" if rate is None else f"{(Decimal(rate) * 100).normalize():f} %"

    column.__name__ = f"{field}_percent"
    return column


def _currency(obj: Model, path: str) -> str:
    value: Any = obj
    for part in path.split("__"):
        value = getattr(value, part)
    currency: str = value
    return currency


class ReadOnlyAdmin(_ModelAdmin):
    """Listed and searchable; written only by services (money, audit trails, telemetry)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ReadOnlyInline(_TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
