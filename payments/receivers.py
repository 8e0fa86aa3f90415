"""The ledger's signal: credit notes that give back money already paid (in its transaction)."""

from django.dispatch import receiver

from payments.services import credit_refund_later, credits_returned
from rentals.signals import ledger_entries_recorded


@receiver(ledger_entries_recorded)
def _credits(sender, entry_ids, charges_only=False, **kwargs):
    if charges_only:
        return  # a booking's or an extension's charge: nothing to give back
    credit_refund_later(credits_returned(entry_ids=entry_ids))
