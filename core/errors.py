"""Errors that services raise; the API turns them into problem details, pages into messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


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
