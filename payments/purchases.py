"""The payments app's side of rentals.purchase_hooks, connected by anchorgpu/wiring.py."""

from payments.services import payment_authorise, purchase_check, purchase_settle
from rentals.purchase_hooks import PurchaseHooks

HOOKS = PurchaseHooks(authorise=payment_authorise, check=purchase_check, settle=purchase_settle)
