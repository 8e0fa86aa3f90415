"""The ledger's signal, turned into invoices and credit notes in the same transaction, and
numbered after its commit."""

from django.db import transaction
from django.dispatch import receiver

from core.publish import publish_once
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
    if issued:  # numbered (and then sent to KSeF) after the commit, by invoices_number_task
        transaction.on_commit(lambda: publish_once("invoices.tasks.invoices_number_task"))
