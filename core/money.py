"""Money: Decimal amounts with their currency, never floats.

`Money` refuses to mix currencies, so a quote can never add dollars to euros by accident.
Each currency keeps its own minor units (JPY 0, USD 2, KWD 3), read from the CLDR data that
babel ships rather than a table of our own. Columns hold up to 4 decimal places, the most
any ISO 4217 currency uses; an amount is always stored at its currency's precision.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from babel.numbers import format_currency, get_currency_precision, is_currency
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import get_language
from django.utils.translation import gettext as _

MAX_DIGITS = 18
DECIMAL_PLACES = 4  # the column's scale; `minor_units` is each currency's own


def default_currency() -> str:
    currency: str = settings.ANCHORGPU["CURRENCY"]
    return currency


@lru_cache(maxsize=64)
def minor_units(currency: str) -> int:
    """Decimal places of a currency: 0 for JPY, 2 for USD, 3 for KWD."""
    if not is_currency(currency):
        raise ValueError(f"unknown currency {currency!r}")
    return get_currency_precision(currency)


def quantize(amount: Decimal, currency: str) -> Decimal:
    """`amount` rounded half-even to the currency's minor unit."""
    return Decimal(amount).quantize(Decimal(1).scaleb(-minor_units(currency)), ROUND_HALF_EVEN)


def validate_currency(value: str) -> None:
    if not isinstance(value, str) or not is_currency(value):
        raise ValidationError(_("%(code)s is not an ISO 4217 currency code.") % {"code": value})


def amount_check(amount: Decimal, currency: str) -> None:
    """Refuse an amount finer than its currency's minor unit (a price of 12.5 JPY), so no
    stored price is ever rounded silently."""
    if amount is None or not is_currency(currency or ""):
        return
    places = minor_units(currency)
    if Decimal(amount) != quantize(amount, currency):
        raise ValidationError(
            _("%(currency)s amounts have %(places)s decimal places; %(amount)s has more.")
            % {"currency": currency, "places": places, "amount": amount}
        )


def money_text(amount: Decimal | int | str, currency: str, language: str | None = None) -> str:
    """ "1,296.00 USD" (en), "1 296,00 USD" (pl), "1,296 JPY", "12.345 KWD": grouped, with the
    language's decimal mark and the currency's own number of decimals."""
    locale = (language or get_language() or "en").replace("-", "_")
    return _money_text(str(Decimal(amount)), currency, locale)


@lru_cache(maxsize=4096)
def _money_text(amount: str, currency: str, locale: str) -> str:
    """`money_text`, once per process for each amount as written (a float as its exact
    binary value, as babel reads it): babel takes about 0.1 ms an amount, and a statement's
    page repeats the same few prices."""
    return format_currency(
        Decimal(amount), currency, format="#,##0.## ¤¤", locale=locale, currency_digits=True
    )


if TYPE_CHECKING:
    # The stubs' fields are generic in what they take and give (Django's are not subscriptable
    # at run time); left Any, the plugin fills in each column's own, None where it is nullable.
    _DecimalField = models.DecimalField[Any, Any]
    _CharField = models.CharField[Any, Any]
else:
    _DecimalField, _CharField = models.DecimalField, models.CharField


class MoneyField(_DecimalField):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_digits", MAX_DIGITS)
        kwargs.setdefault("decimal_places", DECIMAL_PLACES)
        super().__init__(*args, **kwargs)


class CurrencyField(_CharField):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 3)
        kwargs.setdefault("default", default_currency)
        kwargs.setdefault("validators", [validate_currency])
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("default", None)
        kwargs.pop("validators", None)
        return name, path, args, kwargs


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str

    def __post_init__(self) -> None:
        if isinstance(self.amount, float):
            raise TypeError("Money never holds a float")
        object.__setattr__(self, "amount", quantize(Decimal(self.amount), self.currency))

    def _same(self, other: "Money") -> "Money":
        if other.currency != self.currency:
            raise ValueError(f"cannot combine {self.currency} with {other.currency}")
        return other

    def __add__(self, other: object) -> "Money":
        if not isinstance(other, Money):
            return NotImplemented
        other = self._same(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: object) -> "Money":
        if not isinstance(other, Money):
            return NotImplemented
        other = self._same(other)
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor: int) -> "Money":
        if not isinstance(factor, int):
            raise TypeError("Money multiplies by whole numbers only")
        return Money(self.amount * factor, self.currency)

    @classmethod
    def zero(cls, currency: str) -> "Money":
        return cls(Decimal(0), currency)

    def __str__(self) -> str:
        return f"{self.amount} {self.currency}"

    def text(self, language: str | None = None) -> str:
        return money_text(self.amount, self.currency, language)
