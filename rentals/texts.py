"""Words for stored facts, in the active language.

Quote lines and ledger rows keep facts (kind, model, count, periods, option), never
sentences, so a Polish reader sees Polish lines for a quote an English-speaking script
made. Pages, the API, CSV and e-mails all call these, under the reader's language.
"""

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from catalog.models import RentalPeriod
from rentals.models import LedgerEntry, LedgerReason, QuoteLine, QuoteLineKind

# The fixed periods get real plurals (Polish has three forms); an admin's own period is
# shown as "3 × name".
_PERIOD_WORDS = {
    "day": lambda n: ngettext("%(n)s day", "%(n)s days", n),
    "week": lambda n: ngettext("%(n)s week", "%(n)s weeks", n),
    "month": lambda n: ngettext("%(n)s month", "%(n)s months", n),
}


def periods_text(period: RentalPeriod, n: int) -> str:
    """ "3 weeks", "3 tygodnie", or "3 × sprint" for a period without a plural of its own."""
    words = _PERIOD_WORDS.get(period.slug)
    if words is None:
        return f"{n} × {_(period.name)}"
    return words(n) % {"n": n}


def quote_line_text(line: QuoteLine) -> str:
    """ "2 × H100 80GB for 3 weeks", "Extra storage: 2 TB for 3 weeks", "Setup: 1 unit (one-time)"."""
    quote = line.quote
    if line.kind == QuoteLineKind.GPU:
        return _("%(count)s × %(model)s for %(periods)s") % {
            "count": line.count,
            "model": quote.gpu_model.name,
            "periods": periods_text(quote.period, line.periods),
        }
    facts = {"option": line.option.name, "count": line.count, "unit": line.option.unit}
    if line.periods is None:
        return _("%(option)s: %(count)s %(unit)s (one-time)") % facts
    return _("%(option)s: %(count)s %(unit)s for %(periods)s") % {
        **facts,
        "periods": periods_text(quote.period, line.periods),
    }


def ledger_entry_text(entry: LedgerEntry) -> str:
    """ "Booking: 2 × H100 80GB for 3 weeks", "Extension: …", "Refund: cancelled before the start"."""
    if entry.reason == LedgerReason.CANCELLATION:
        return _("Refund: cancelled before the start")
    allocation = entry.allocation
    facts = {
        "count": allocation.gpu_count,
        "model": allocation.gpu_model.name,
        "periods": periods_text(allocation.period, entry.period_count),
    }
    if entry.reason == LedgerReason.EXTENSION:
        return _("Extension: %(count)s × %(model)s for %(periods)s") % facts
    return _("Booking: %(count)s × %(model)s for %(periods)s") % facts


def access_words(state: str) -> tuple[str, str]:
    """(label, explanation) of an allocation's access state (rentals.access)."""
    return {
        "scheduled": (
            _("not yet"),
            _("The node lets your keys in once the paid period starts."),
        ),
        "pending": (
            _("getting ready"),
            _("The node's agent has not applied this yet; it looks every few seconds."),
        ),
        "ready": (_("ready"), _("Log in with one of the keys below.")),
        "revoking": (
            _("closing"),
            _("The node's agent has yet to take access away."),
        ),
        "revoked": (
            _("closed"),
            _(
                "Nobody can log in: the allocation is stopped or has ended. Start it to log in again."
            ),
        ),
    }[state]
