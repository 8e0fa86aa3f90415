"""The composition root connects what a lower layer asks for with the higher layer that
supplies it: a purchase in rentals is paid through the payments app (rentals.purchase_hooks),
which rentals never imports."""

from payments.purchases import HOOKS
from rentals.purchase_hooks import purchase_hooks_connect


def connect() -> None:
    purchase_hooks_connect(HOOKS)
