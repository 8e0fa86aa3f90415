"""What the rentals layer tells the layers above it, without knowing them.

All are sent inside the transaction that records the rows: a receiver that writes (the
webhooks' outbox) commits or rolls back with them, so an event is never announced for a
change that did not happen, nor lost for one that did.
"""

from django.dispatch import Signal

# event_ids: [AllocationEvent pk] just recorded, in order; team_ids: their teams, when the
# sender has them at hand
allocation_events_recorded = Signal()
# notice_ids: [Notice pk] of expiry warnings just recorded
allocation_notices_recorded = Signal()
# entry_ids: [LedgerEntry pk] of charges, refunds and credits just recorded (the invoices'
# cue), charges_only: whether all are charges; sent as the last write of its transaction
# where it can be
ledger_entries_recorded = Signal()
