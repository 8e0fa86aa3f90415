"""Errors that services raise; the API turns them into problem details, pages into messages.

Services raise `DomainError`s only. Input that does not validate is `Invalid`, which keeps
its messages per field; Django's `ValidationError` (from `full_clean()` or a model field's
validator) becomes one at the service's edge: `validated(instance)` for `full_clean()`,
`invalid_from(exc)` or `as_invalid()` for any other check that speaks ValidationError.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db.models import Model
from django.forms import BaseForm
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

# Messages that belong to no one field. `full_clean()` files its own under "__all__"
# (django.core.exceptions.NON_FIELD_ERRORS), and `Invalid` keeps that key as it came.
NON_FIELD = "non_field_errors"


class DomainError(Exception):
    """A refused operation that is the client's to fix or retry; nothing was changed."""

    status = 400
    code = "invalid"
    title = _("The request was refused")
    retry_after: int | None = None  # seconds, for refusals that a retry soon may pass

    def __init__(
        self,
        detail: StrOrPromise,
        *,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(str(detail))
        self.detail = detail
        self.field = field
        self.extra = extra or {}

    @property
    def messages(self) -> list[str]:
        """What a page says, in order: the detail (Invalid: each of its messages)."""
        return [str(self.detail)]

    def field_errors(self) -> dict[str, list[str]]:
        """{field: [message, ...]}: the refusal's detail under its field, if it names one."""
        return {self.field: [str(self.detail)]} if self.field else {}


class Conflict(DomainError):
    status = 409
    code = "conflict"
    title = _("The request conflicts with the current state")


class CacheUnavailable(DomainError):
    """Redis cannot do what must not fail open (core.cache.StrictCache): try again soon."""

    status = 503
    code = "cache_unavailable"
    title = _("Part of AnchorGPU is briefly unavailable")
    retry_after = 10


class Invalid(DomainError):
    """Input that does not validate, every message kept under its field: pages put each
    beside its field (`form_errors_add`), the API answers them as the problem's `errors`."""

    status = 400
    code = "invalid"
    title = _("Invalid input")

    def __init__(self, errors: Mapping[str, object] | StrOrPromise | list[Any]) -> None:
        """`errors`: {field: message or [messages]}, or messages of no one field."""
        given = errors.items() if isinstance(errors, Mapping) else [(NON_FIELD, errors)]
        self.errors: dict[str, list[str]] = {
            str(field): messages for field, value in given if (messages := _messages(value))
        }
        super().__init__(self.messages[0] if self.errors else self.title)

    @property
    def messages(self) -> list[str]:
        """Every message, field by field."""
        return [message for messages in self.errors.values() for message in messages]

    def field_errors(self) -> dict[str, list[str]]:
        return self.errors


def _messages(value: object) -> list[str]:
    if isinstance(value, ValidationError):
        return list(value.messages)
    if isinstance(value, str | Promise):
        return [str(value)]
    if isinstance(value, list | tuple):
        return [message for item in value for message in _messages(item)]
    return [str(value)]


def invalid_from(exc: ValidationError) -> Invalid:
    """Django's ValidationError as the refusal services raise, its field errors kept."""
    if hasattr(exc, "error_dict"):
        return Invalid({field: [m for e in errors for m in e.messages]
                        for field, errors in exc.error_dict.items()})  # fmt: skip
    return Invalid(exc.messages)


@contextmanager
def as_invalid() -> Iterator[None]:
    """Run a check that speaks Django's ValidationError; what it refuses leaves as Invalid."""
    try:
        yield
    except ValidationError as exc:
        raise invalid_from(exc) from exc


def validated(instance: Model, **kwargs: Any) -> None:
    """`instance.full_clean(**kwargs)`, refusing with Invalid (its field errors kept)."""
    with as_invalid():
        instance.full_clean(**kwargs)


def form_errors_add(form: BaseForm, exc: Invalid) -> None:
    """Each message beside its field where the form has that field, above the form if not."""
    for field, messages in exc.errors.items():
        for message in messages:
            form.add_error(field if field in form.fields else None, message)
