"""What a purchase (a booking, an extension) asks of the layers above rentals about money.

rentals sits below the payments app (docs/architecture.md), yet a purchase must be paid: a
card team's gross is authorised before the purchase's transaction, the purchase checks it
(and an invoiced team's credit limit and overdue invoices) inside that transaction, and the
authorisation is captured or cancelled after it. The payments app supplies the three steps
(`payments.purchases`), and the composition root connects them (`anchorgpu/wiring.py`):
rentals calls this interface and never imports payments.

- `authorise(acting, quote_id, key)`: before the transaction and outside any lock. Back: an
  opaque payment (or None where the team is invoiced), or a refusal (DomainError) that says
  whether it is the key's final answer (`final`).
- `check(acting, quote, payment, at)`: inside the purchase's transaction, under its locks:
  refuses (DomainError) a card purchase that was not authorised for exactly this quote,
  and an invoiced team's purchase over its credit limit or while an invoice is overdue.
- `settle(payment)`: after the transaction, with the answer stored: captures what was
  booked, cancels an authorisation the purchase did not use.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PurchaseHooks:
    authorise: Callable[..., object | None]
    check: Callable[..., None]
    settle: Callable[..., None]


_connected: list[PurchaseHooks] = []


def purchase_hooks_connect(hooks: PurchaseHooks) -> None:
    """Called once by the composition root (anchorgpu/wiring.py)."""
    _connected[:] = [hooks]


def purchase_authorise(*, acting, quote_id, key: str):
    return (
        _connected[0].authorise(acting=acting, quote_id=quote_id, key=key) if _connected else None
    )


def purchase_check(*, acting, quote, payment, at) -> None:
    if _connected:
        _connected[0].check(acting=acting, quote=quote, payment=payment, at=at)


def purchase_settle(*, payment) -> None:
    if _connected and payment is not None:
        _connected[0].settle(payment=payment)
