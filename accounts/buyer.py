"""A team's buyer details as invoices name them: checked and put in their stored form.

VAT IDs are checked offline with python-stdnum: the check digits of a Polish NIP and of
every EU member state's VAT number (VIES, which would also say whether the number is
registered, cannot be reached from here). A number outside the EU is kept as given.
"""

from dataclasses import dataclass
from functools import lru_cache

from babel import Locale
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from stdnum.eu import vat as eu_vat
from stdnum.exceptions import ValidationError as StdnumError

from core.vat import EU_COUNTRIES, TaxTreatment, seller_country, treatment_for, vat_id_prefix


@lru_cache(maxsize=1)
def country_codes() -> frozenset[str]:
    """ISO 3166-1 alpha-2 codes (babel's territories less its regions such as 001 or 150)."""
    return frozenset(code for code in Locale("en").territories if len(code) == 2 and code.isalpha())


def country_name(code: str, language: str = "en") -> str:
    return Locale.parse(language.replace("-", "_")).territories.get(code, code)


@dataclass(frozen=True)
class Buyer:
    legal_name: str
    address: str
    country: str
    vat_id: str


def buyer_check(*, legal_name: str, address: str, country: str, vat_id: str) -> Buyer:
    """The details in their stored form, or a ValidationError naming each bad field. All
    empty: a consumer. A business needs its address and country; in the EU its VAT ID
    must pass its check digits and carry (or is given) the country's prefix."""
    legal_name = " ".join((legal_name or "").split())
    address = "\n".join(line.strip() for line in (address or "").splitlines() if line.strip())
    country = (country or "").strip().upper()
    vat_id = "".join((vat_id or "").split()).upper()
    if not legal_name:
        if address or country or vat_id:
            raise ValidationError(
                {"legal_name": _("Give the legal name, or leave every field empty (a consumer).")}
            )
        return Buyer("", "", "", "")
    errors = {}
    if not address:
        errors["address"] = _("Give the address an invoice names.")
    if country not in country_codes():
        errors["country"] = _("Choose a country (ISO 3166 code, such as PL or DE).")
    elif vat_id:
        try:
            vat_id = _vat_id(country, vat_id)
        except ValidationError as exc:
            errors["vat_id"] = exc.messages[0]
    if errors:
        raise ValidationError(errors)
    return Buyer(legal_name, address, country, vat_id)


def _vat_id(country: str, vat_id: str) -> str:
    if country not in EU_COUNTRIES:
        if len(vat_id) > 20 or not vat_id.replace("-", "").isalnum():
            raise ValidationError(_("A tax ID has at most 20 letters, digits and dashes."))
        return vat_id
    prefix = vat_id_prefix(country)
    if vat_id[:2].isdigit() or (country == seller_country() and not vat_id.startswith(prefix)):
        vat_id = prefix + vat_id
    if not vat_id.startswith(prefix):
        raise ValidationError(
            _("A VAT ID of %(country)s starts with %(prefix)s.")
            % {"country": country_name(country), "prefix": prefix}
        )
    try:
        return eu_vat.validate(vat_id)
    except StdnumError:
        raise ValidationError(
            _("%(vat_id)s is not a valid VAT ID of %(country)s (its check digits do not match).")
            % {"vat_id": vat_id, "country": country_name(country)}
        ) from None


def team_tax_treatment(team) -> TaxTreatment:
    """How the team's quotes are taxed now."""
    return treatment_for(country=team.country, vat_id=team.vat_id, is_business=team.is_business)
