"""VAT: which treatment a buyer gets, at what rate, and how an invoice's VAT is rounded.

Catalog prices are net. A quote adds VAT by the buyer's treatment, decided from the seller's
country (a setting) and the team's buyer details:

- a business in the seller's country: the standard rate (`DOMESTIC`);
- a business elsewhere in the EU with a valid VAT ID: reverse charge, 0, the buyer accounts
  for the VAT (`REVERSE_CHARGE`, art. 44 and 196 of Directive 2006/112/EC; in Poland art. 28b
  of the VAT act);
- a business outside the EU: not taxable in the seller's country (`OUTSIDE_EU`);
- anyone else (a person, or a business without a VAT ID in the EU): the standard rate
  (`CONSUMER`).

Rounding follows the Polish VAT act (art. 106e ust. 11): VAT is computed on the invoice's net
total per rate and rounded once, half up, to the currency's minor unit. The lines get shares
of that total that add up to it exactly (largest remainder), so per-line and total VAT agree.
"""

from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from stdnum.eu import vat as eu_vat

from core.money import minor_units

# EU member states by ISO 3166 code (Greece's VAT prefix is EL; Northern Ireland's XI is not
# a country code).
EU_COUNTRIES = frozenset(code.upper() for code in eu_vat.MEMBER_STATES if code not in ("xi",)) | {
    "GR"
}


class TaxTreatment(models.TextChoices):
    DOMESTIC = "domestic", _("domestic VAT")
    REVERSE_CHARGE = "reverse_charge", _("reverse charge")
    OUTSIDE_EU = "outside_eu", _("not taxable here")
    CONSUMER = "consumer", _("VAT for a consumer")


def seller_country() -> str:
    country: str = settings.ANCHORGPU["SELLER"]["COUNTRY"]
    return country


def vat_id_prefix(country: str) -> str:
    """The VAT ID prefix of an EU country: its ISO code, but EL for Greece."""
    return "EL" if country == "GR" else country


def treatment_for(*, country: str, vat_id: str, is_business: bool) -> TaxTreatment:
    """The treatment of a buyer; `vat_id` is one the team's form already validated."""
    if not is_business:
        return TaxTreatment.CONSUMER
    if country == seller_country():
        return TaxTreatment.DOMESTIC
    if country in EU_COUNTRIES:
        return TaxTreatment.REVERSE_CHARGE if vat_id else TaxTreatment.CONSUMER
    return TaxTreatment.OUTSIDE_EU


def rate_for(treatment: str) -> Decimal:
    if treatment in (TaxTreatment.DOMESTIC, TaxTreatment.CONSUMER):
        rate: Decimal = settings.ANCHORGPU["VAT_RATE"]
        return rate
    return Decimal(0)


def legal_note(treatment: str) -> str:
    """The words an invoice must carry for a treatment with no VAT, else ''."""
    if treatment == TaxTreatment.REVERSE_CHARGE:
        return str(_("Reverse charge: the buyer accounts for the VAT."))
    if treatment == TaxTreatment.OUTSIDE_EU:
        return str(_("Not taxable in the seller's country: the place of supply is the buyer's."))
    return ""


def _unit(currency: str) -> Decimal:
    return Decimal(1).scaleb(-minor_units(currency))


def vat_total(net: Decimal, rate: Decimal, currency: str) -> Decimal:
    """VAT on a net total, rounded once, half up, to the currency's minor unit."""
    return (Decimal(net) * rate).quantize(_unit(currency), ROUND_HALF_UP)


def vat_split(nets: list[Decimal], rate: Decimal, currency: str) -> tuple[list[Decimal], Decimal]:
    """Each line's share of the invoice's VAT, and that VAT: the shares add up to it exactly.
    Each line gets its exact VAT rounded down; the units left over go to the lines that lost
    the most to rounding (the largest remainders, the first line first on a tie)."""
    total = vat_total(sum(nets, Decimal(0)), rate, currency)
    unit = _unit(currency)
    exact = [Decimal(net) * rate for net in nets]
    shares = [share.quantize(unit, ROUND_DOWN) for share in exact]
    left = int((total - sum(shares, Decimal(0))) / unit)
    by_remainder = sorted(range(len(nets)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder[: max(left, 0)]:
        shares[i] += unit
    return shares, total
