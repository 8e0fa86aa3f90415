"""Money and period names for people: grouped and with the decimal mark of the language."""

from django import template
from django.template.defaultfilters import floatformat
from django.utils.translation import gettext

register = template.Library()


@register.filter
def money(amount, currency=""):
    """`{{ amount|money:currency }}` → "1,296.00 USD" (en) or "1 296,00 USD" (pl)."""
    if amount is None or amount == "":
        return "—"
    text = floatformat(amount, "2g")
    return f"{text} {currency}".strip()


@register.filter
def period_name(period):
    """A rental period's name in the page's language (admins may add untranslated ones)."""
    return gettext(period.name)
