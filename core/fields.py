"""Serializer fields every API shares."""

import copy
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.fields import get_attribute

from core.money import DECIMAL_PLACES, MAX_DIGITS, quantize

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)


class BoundedDateTimeField(serializers.DateTimeField):
    """A time between 2000 and 2100: arithmetic on year 1 or 9999 overflows, and nothing
    of ours happens outside these bounds."""

    def to_internal_value(self, value: datetime | str) -> datetime:
        parsed = super().to_internal_value(value)
        if not EARLIEST <= parsed < LATEST:
            raise serializers.ValidationError(
                _("Give a time between %(from)s and %(to)s.")
                % {"from": EARLIEST.date().isoformat(), "to": LATEST.date().isoformat()}
            )
        return parsed


class MoneyAmountField(serializers.DecimalField):
    """An amount as a string with its own currency's decimals, read from `currency_source`
    beside it: "1296.00" USD, "1296" JPY, "12.345" KWD."""

    def __init__(self, currency_source: str = "currency", **kwargs: Any) -> None:
        self.currency_source = currency_source.split(".")
        kwargs.setdefault("read_only", True)
        super().__init__(max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES, **kwargs)

    # The stubs' DecimalField reads and shows one Decimal; this one reads (amount, currency).
    def get_attribute(self, instance: Any) -> tuple[Decimal | None, str]:  # type: ignore[override]
        amount = super().get_attribute(instance)
        return amount, get_attribute(instance, self.currency_source)

    def to_representation(self, value: tuple[Decimal | None, str]) -> str | None:  # type: ignore[override]
        amount, currency = value
        return None if amount is None else str(quantize(amount, currency))


class FieldsBuiltOnce:
    """For a ModelSerializer whose fields depend on its class alone (not on its context or
    instance): DRF builds them again for every instance it renders (each model field looked
    up and built, the declared ones deep-copied), which was most of an allocation's
    rendering. Built once per class here; each instance gets a deep copy of them, as DRF
    gives each instance of its declared fields."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        cls = type(self)
        built: dict[str, serializers.Field[Any, Any, Any, Any]] | None = cls.__dict__.get(
            "_fields_built"
        )
        if built is None:
            built = super().get_fields()  # type: ignore[misc]  # a mixin for serializers
            cls._fields_built = built  # type: ignore[attr-defined]
        return copy.deepcopy(built)
