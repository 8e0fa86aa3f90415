"""Money and period names for people: grouped and with the decimal mark of the language."""

from decimal import Decimal

from django import template

from core.money import default_currency, money_text

register = template.Library()


@register.filter
def money(amount: Decimal | int | str | None, currency: str = "") -> str:
    """`{{ amount|money:currency }}` → "1,296.00 USD" (en), "1 296,00 USD" (pl), "1,296 JPY";
    the deployment's currency when none is given."""
    if amount is None or amount == "":
        return "—"
    return money_text(amount, currency or default_currency())


@register.simple_tag
def deployment_currency() -> str:
    """`{% deployment_currency %}` → "USD": the currency prices and limits are kept in."""
    return default_currency()
