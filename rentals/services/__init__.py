from rentals.services.allocations import (
    allocation_book,
    allocation_cancel,
    allocation_extend,
    allocation_start,
    allocation_stop,
    allocations_enforce,
    expiry_warnings_send,
)
from rentals.services.idempotency import (
    idempotency_key_parse,
    idempotency_keys_purge,
    idempotent_call,
    request_fingerprint,
)
from rentals.services.quotes import quote_create

__all__ = [
    "allocation_book",
    "allocation_cancel",
    "allocation_extend",
    "allocation_start",
    "allocation_stop",
    "allocations_enforce",
    "expiry_warnings_send",
    "idempotency_key_parse",
    "idempotency_keys_purge",
    "idempotent_call",
    "quote_create",
    "request_fingerprint",
]
