"""The ledger's signal, turned into invoices and credit notes in the same transaction
(numbered after its commit: invoices_number_task)."""

from django.db import transaction
from django.dispatch import receiver

from invoices.services import invoices_held_among, invoices_issue
from invoices.tasks import invoices_held_alert_task
from rentals.signals import ledger_entries_recorded


@receiver(ledger_entries_recorded)
def _ledger_entries(sender, entry_ids, charges_only=False, **kwargs):
    issued = invoices_issue(entry_ids=entry_ids, charges_only=charges_only)
    # Every charge gets its invoice, unless one waits for its exchange rate: staff are told.
    if (len(issued) < len(entry_ids) or not charges_only) and invoices_held_among(
        entry_ids=entry_ids
    ):
        transaction.on_commit(invoices_held_alert_task.delay)
