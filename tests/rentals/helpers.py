import uuid

from rentals.services import allocation_book, quote_create


def book(
    user, *, model="h100", count=1, period="week", periods=1, starts_at=None, now=None, options=None
):
    quote = quote_create(
        user=user, gpu_model=model, gpu_count=count, period=period, period_count=periods,
        starts_at=starts_at, options=options, now=now,
    )  # fmt: skip
    return allocation_book(user=user, quote=quote, now=now)


def key():
    return str(uuid.uuid4())
