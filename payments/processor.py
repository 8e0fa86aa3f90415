"""The payment processor, through the official `stripe` library, at PAYMENTS["API_BASE"]
(Stripe, or localstripe on loopback in the demo and tests). Every call that moves money
sends Stripe's own Idempotency-Key, so a retried call never moves it twice. Network
failures and the processor's 5xx become `ProcessorUnavailable`; card errors come back as
`stripe.CardError` for the caller to word."""

from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import ParamSpec, TypeVar

import stripe
from django.conf import settings
from django.utils.translation import gettext as _

from core.money import minor_units
from payments.errors import ProcessorUnavailable


def client() -> stripe.StripeClient:
    conf = settings.PAYMENTS
    return _client(conf["API_KEY"] or "sk_test_unset", conf["API_BASE"], conf["TIMEOUT"])


@lru_cache(maxsize=4)
def _client(key: str, base: str, timeout: float) -> stripe.StripeClient:
    """One client (and its connection pool) per configuration."""
    return stripe.StripeClient(
        key,
        base_addresses={"api": base},
        max_network_retries=0,  # our own retries are tasks; a request must not hang
        http_client=stripe.HTTPXClient(timeout=timeout, allow_sync_methods=True),
    )


def to_minor(amount: Decimal, currency: str) -> int:
    """An exact amount in the currency's minor units; refuses a finer amount."""
    scaled = Decimal(amount).scaleb(minor_units(currency))
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{amount} {currency} has more decimal places than its currency")
    return int(scaled)


def from_minor(value: int, currency: str) -> Decimal:
    return Decimal(value).scaleb(-minor_units(currency))


P = ParamSpec("P")
T = TypeVar("T")


def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run one processor call; the processor down or failing → ProcessorUnavailable."""
    try:
        return fn(*args, **kwargs)
    except (stripe.APIConnectionError, stripe.RateLimitError) as exc:
        raise ProcessorUnavailable(
            _("The payment processor did not answer; nothing was charged. Try again shortly.")
        ) from exc
    except stripe.APIError as exc:
        raise ProcessorUnavailable(
            _("The payment processor failed; nothing was charged. Try again shortly.")
        ) from exc
