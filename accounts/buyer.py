"""A team's buyer details as invoices name them: checked and put in their stored form.

The country is one of ISO 3166-1's (`accounts.countries`). VAT IDs are checked offline with
python-stdnum: the check digits of a Polish NIP and of every EU member state's VAT number
(VIES, which would also say whether the number is registered, cannot be reached from here).
A VAT ID of another country than the buyer's is refused: an EU prefix that is not the
buyer's, or any other country's VAT number that passes that country's check. A number
outside the EU that is neither is kept as given.

Details stored before a rule was added (made-up countries, another country's VAT
ID) are checked again where they are used: a team whose details no longer pass is taxed as
a consumer (`team_tax_treatment`) until an owner corrects them, and staff see it
(`accounts.models.BuyerReview`).
"""

from dataclasses import dataclass

from babel import Locale
from django.core.exceptions import ValidationError
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from stdnum import vatin
from stdnum.eu import vat as eu_vat
from stdnum.exceptions import ValidationError as StdnumError

from accounts.countries import ISO_3166_1
from core.vat import EU_COUNTRIES, TaxTreatment, treatment_for, vat_id_prefix

# VAT ID prefixes that are not their country's ISO code: Greece's EL, Northern Ireland's XI.
PREFIX_COUNTRY = {"EL": "GR", "XI": "GB"}
EU_PREFIXES = frozenset({vat_id_prefix(code) for code in EU_COUNTRIES} | {"XI"})


def country_codes() -> frozenset[str]:
    """The countries a buyer may name: ISO 3166-1 alpha-2 codes."""
    return ISO_3166_1


def country_name(code: str, language: str | None = None) -> str:
    """The country's name in `language` (default: the active one)."""
    language = language or get_language() or "en"
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
    other = _vat_id_country(vat_id)
    if other is not None and other != country:
        raise ValidationError(
            _(
                "%(vat_id)s is a VAT ID of %(other)s, not of %(country)s: choose %(other)s as "
                "the country, or give the tax ID of %(country)s."
            )
            % {"vat_id": vat_id, "other": country_name(other), "country": country_name(country)}
        )
    if country not in EU_COUNTRIES:
        if len(vat_id) > 20 or not vat_id.replace("-", "").isalnum():
            raise ValidationError(_("A tax ID has at most 20 letters, digits and dashes."))
        return vat_id
    prefix = vat_id_prefix(country)
    if not vat_id[:2].isalpha():  # the number alone (a Polish NIP as printed): its prefix
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


def _vat_id_country(vat_id: str) -> str | None:
    """The country whose VAT ID this is by its prefix, where that is sure: an EU VAT prefix
    (EL: Greece, XI: the United Kingdom's Northern Ireland), or another country's prefix on a
    number that passes that country's check; None otherwise (a number with no prefix, or
    letters that only look like one, such as a Mexican RFC's)."""
    prefix = vat_id[:2]
    if not prefix.isalpha():
        return None
    country = PREFIX_COUNTRY.get(prefix, prefix)
    if prefix in EU_PREFIXES:
        return country
    if country in ISO_3166_1 and vatin.is_valid(vat_id):
        return country
    return None


def buyer_problems(team) -> dict[str, str]:
    """Why the team's stored details would be refused today ({field: message}), or {}:
    details saved before a check existed (a made-up country, another country's VAT ID)."""
    if not team.is_business:
        return {}
    try:
        buyer_check(
            legal_name=team.legal_name, address=team.address, country=team.country,
            vat_id=team.vat_id,
        )  # fmt: skip
    except ValidationError as exc:
        return {field: " ".join(messages) for field, messages in exc.message_dict.items()}
    return {}


def stored_tax_treatment(team) -> TaxTreatment:
    """The treatment the stored details earn as they are, checked or not (what quotes got
    before these checks)."""
    return treatment_for(country=team.country, vat_id=team.vat_id, is_business=team.is_business)


def team_tax_treatment(team) -> TaxTreatment:
    """How the team's quotes are taxed now: by its details, checked again each time; details
    that no longer pass earn no reverse charge and no "not taxable here", only the standard
    rate (as a consumer's) until an owner or billing member corrects them."""
    if buyer_problems(team):
        return TaxTreatment.CONSUMER
    return stored_tax_treatment(team)
