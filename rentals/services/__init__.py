"""Writes of the rentals layer. Every page, API view, admin action and task calls these."""

from rentals.services.access import access_report, allocation_keys_set
from rentals.services.activity import gpu_activity_flags_update
from rentals.services.allocations import (
    allocation_cancel,
    allocation_extend,
    allocation_start,
    allocation_stop,
    cluster_cancel,
    cluster_start,
    cluster_stop,
    extension_quote_create,
)
from rentals.services.bookings import allocation_book
from rentals.services.enforcement import allocations_enforce
from rentals.services.impairments import allocation_replace, allocations_impairment_sync
from rentals.services.notices import (
    expiry_notices_record,
    notice_send,
    notices_unsent,
    stopped_notices_record,
    webhook_disabled_notice_record,
)
from rentals.services.quotes import (
    quote_capacity_refusal,
    quote_create,
    quote_estimate,
    quotes_expired_purge,
)

__all__ = [
    "access_report",
    "allocation_keys_set",
    "allocation_book",
    "allocation_cancel",
    "allocation_extend",
    "allocation_start",
    "allocation_stop",
    "allocations_enforce",
    "allocation_replace",
    "allocations_impairment_sync",
    "cluster_cancel",
    "cluster_start",
    "cluster_stop",
    "expiry_notices_record",
    "extension_quote_create",
    "gpu_activity_flags_update",
    "notice_send",
    "notices_unsent",
    "quote_capacity_refusal",
    "quote_create",
    "quote_estimate",
    "quotes_expired_purge",
    "stopped_notices_record",
    "webhook_disabled_notice_record",
]
