"""Words on invoices, in both languages at once (Polish with English beside it, as Polish
practice allows), from the facts each document keeps.

The labels are gettext messages like every other word; `both()` renders one in Polish and
in English. Lines reuse rentals' own phrasing ("2 × H100 for 3 weeks") with the catalog's
names copied into the line when it was issued.
"""

from datetime import datetime

from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from catalog.models import RentalPeriod
from core.dates import when_text
from core.vat import TaxTreatment
from rentals.texts import periods_text

LANGUAGES = ("pl", "en")

LABELS = {
    "invoice": gettext_lazy("VAT invoice"),
    "credit_note": pgettext_lazy("document", "Credit note"),
    "number": gettext_lazy("Number"),
    "issued_on": gettext_lazy("Issue date"),
    "sold_on": gettext_lazy("Sale date"),
    "seller": gettext_lazy("Seller"),
    "buyer": gettext_lazy("Buyer"),
    "vat_id": gettext_lazy("VAT ID"),
    "position": gettext_lazy("No."),
    "description": gettext_lazy("Description"),
    "quantity": gettext_lazy("Qty"),
    "unit_price": gettext_lazy("Unit price (net)"),
    "net": gettext_lazy("Net"),
    "vat_rate": gettext_lazy("VAT rate"),
    "vat": gettext_lazy("VAT"),
    "gross": gettext_lazy("Gross"),
    "summary": gettext_lazy("VAT summary"),
    "total": gettext_lazy("Total"),
    "to_pay": gettext_lazy("To pay"),
    "to_refund": gettext_lazy("To refund"),
    "bank_account": gettext_lazy("Bank account"),
    "corrects": gettext_lazy("Corrects invoice"),
    "corrects_issued": gettext_lazy("issued on"),
    "reason": gettext_lazy("Reason"),
    "consumer": gettext_lazy("Consumer"),
    "vat_pln": gettext_lazy("VAT in PLN"),
    "rate": gettext_lazy("Exchange rate"),
    "paid_on": gettext_lazy("Paid on"),
    "due_on": gettext_lazy("Due on"),
    "allocation": gettext_lazy("Allocation"),
}

REASONS = {
    "cancellation": gettext_lazy("booking cancelled before its start: every charge refunded"),
    "impairment": gettext_lazy("credit for impaired GPU time (the provider's fault)"),
}

# The note a treatment puts on the document (Polish law asks for the Polish words).
LEGAL_NOTES = {
    TaxTreatment.REVERSE_CHARGE: gettext_lazy("Reverse charge (art. 28b of the Polish VAT Act)"),
    TaxTreatment.OUTSIDE_EU: gettext_lazy("Not taxable in Poland (place of supply outside Poland)"),
}


def in_language(language: str, message) -> str:
    with translation.override(language):
        return str(message)


def both(message, *, joiner=" / ") -> str:
    """ "Sprzedawca / Seller": one message in Polish, then in English."""
    pl, en = (in_language(code, message) for code in LANGUAGES)
    return pl if pl == en else f"{pl}{joiner}{en}"


def label(key: str) -> str:
    return both(LABELS[key])


def legal_notes() -> dict[str, str]:
    """The note per treatment, both languages, copied into each document as it is issued."""
    return {treatment: both(note) for treatment, note in LEGAL_NOTES.items()}


def reason_text(reason: str) -> str:
    return both(REASONS[reason]) if reason in REASONS else ""


def line_text(facts: dict, language: str) -> str:
    """One line in one language, from its copied facts."""
    with translation.override(language):
        if facts.get("line") == "impaired":
            return _(
                "Credit for impaired time: %(count)s × %(model)s from %(from)s to %(until)s"
            ) % {
                "count": facts["count"],
                "model": facts["model"],
                "from": when_text(_moment(facts["started_at"])),
                "until": when_text(_moment(facts["ended_at"])) if facts.get("ended_at") else "…",
            }
        period = RentalPeriod(
            slug=facts.get("period_slug") or "",
            name_en=facts.get("period_en") or "",
            name_pl=facts.get("period_pl") or "",
        )
        if facts.get("line") == "gpu":
            return _("%(count)s × %(model)s for %(periods)s") % {
                "count": facts["count"],
                "model": facts["model"],
                "periods": periods_text(period, facts["periods"]),
            }
        suffix = "pl" if language == "pl" else "en"
        values = {
            "option": facts.get(f"option_{suffix}") or facts.get("option_en"),
            "count": facts["count"],
            "unit": facts.get(f"unit_{suffix}") or facts.get("unit_en"),
        }
        if facts.get("periods") is None:
            return _("%(option)s: %(count)s %(unit)s (one-time)") % values
        return _("%(option)s: %(count)s %(unit)s for %(periods)s") % {
            **values,
            "periods": periods_text(period, facts["periods"]),
        }


def line_both(facts: dict) -> tuple[str, str]:
    return line_text(facts, "pl"), line_text(facts, "en")


def _moment(value: str) -> datetime:
    return datetime.fromisoformat(value)
