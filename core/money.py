"""Money: Decimal amounts with their currency, never floats.

`Money` refuses to mix currencies, so a quote can never add dollars to euros by accident.
"""

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from django.conf import settings
from django.db import models

MAX_DIGITS = 14
DECIMAL_PLACES = 2
CENT = Decimal(1).scaleb(-DECIMAL_PLACES)


def default_currency():
    return settings.ANCHORGPU["CURRENCY"]


def quantize(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)


class MoneyField(models.DecimalField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("max_digits", MAX_DIGITS)
        kwargs.setdefault("decimal_places", DECIMAL_PLACES)
        super().__init__(*args, **kwargs)


class CurrencyField(models.CharField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("max_length", 3)
        kwargs.setdefault("default", default_currency)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("default", None)
        return name, path, args, kwargs


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str

    def __post_init__(self):
        if isinstance(self.amount, float):
            raise TypeError("Money never holds a float")
        object.__setattr__(self, "amount", quantize(Decimal(self.amount)))

    def _same(self, other):
        if not isinstance(other, Money):
            return NotImplemented
        if other.currency != self.currency:
            raise ValueError(f"cannot combine {self.currency} with {other.currency}")
        return other

    def __add__(self, other):
        other = self._same(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other):
        other = self._same(other)
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor: int):
        if not isinstance(factor, int):
            raise TypeError("Money multiplies by whole numbers only")
        return Money(self.amount * factor, self.currency)

    @classmethod
    def zero(cls, currency):
        return cls(Decimal(0), currency)

    def __str__(self):
        return f"{self.amount} {self.currency}"
