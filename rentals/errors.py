"""The refusals of renting: pages act on these types, the API turns them into problems."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy as _

from accounts.errors import NotAllowed
from core.errors import Conflict, DomainError

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


class NoCapacity(Conflict):
    code = "no_capacity"
    title = _("Not enough free GPUs")

    def __init__(
        self,
        detail: StrOrPromise,
        *,
        earliest_start: datetime | None = None,
        field: str | None = None,
    ) -> None:
        extra = {"earliest_start": earliest_start.isoformat() if earliest_start else None}
        super().__init__(detail, field=field, extra=extra)
        self.earliest_start = earliest_start


class ReadOnly(NotAllowed):
    """Staff read every team's allocations and change none but their own team's: the one
    refusal of pages and API alike (`rentals.selectors.allocation_act_check`). Its code and
    title are the ones the API answered it with from the start."""

    code = "permission_denied"
    title = _("You do not have permission to perform this action.")

    def __init__(self) -> None:
        super().__init__(_("Staff can read every allocation but change none."))


class QuoteMissing(DomainError):
    code = "invalid"
    title = _("No such quote")


class QuoteExpired(Conflict):
    code = "quote_expired"
    title = _("The quote has expired")


class QuoteUsed(Conflict):
    code = "quote_used"
    title = _("The quote was already booked")


class InvalidTransition(Conflict):
    code = "invalid_state"
    title = _("Not possible in the allocation's current state")


class KeyMissing(DomainError):
    code = "idempotency_key_missing"
    title = _("Idempotency-Key header required")


class KeyMalformed(DomainError):
    code = "idempotency_key_malformed"
    title = _("Malformed Idempotency-Key header")


class KeyReused(DomainError):
    status = 422
    code = "idempotency_key_reused"
    title = _("Idempotency-Key reused with a different request")


class KeyInFlight(Conflict):
    code = "in_flight"
    title = _("A request with this Idempotency-Key is still being processed")
    retry_after = 1


class SpendLimitReached(Conflict):
    code = "spend_limit_reached"
    title = _("The team's monthly spend limit would be passed")


class ChoiceMissing(Conflict):
    """A maintenance window over bookings, sent without a choice for each of them: the
    problem lists them (`affected`) with the choices each allows."""

    code = "affected_allocations"
    title = _("Bookings are in the window's way")

    def __init__(self, detail, *, affected: list[dict]):
        super().__init__(detail, extra={"affected": affected})
        self.affected = affected


class NoSpare(Conflict):
    code = "no_spare"
    title = _("No equivalent free GPUs")


class NotImpaired(Conflict):
    code = "not_impaired"
    title = _("Nothing impaired to remedy")


class AlreadyCredited(Conflict):
    code = "already_credited"
    title = _("The impaired time was already credited")


class ExportNotFound(DomainError):
    status = 404
    code = "not_found"
    title = _("Not found")


class ExportExpired(DomainError):
    status = 410
    code = "export_expired"
    title = _("This export has expired")


class ExportNotReady(Conflict):
    code = "export_not_ready"
    title = _("This export is not ready")
    retry_after = 30


class TooManyExports(Conflict):
    code = "too_many_exports"
    title = _("Too many exports being prepared")


class ExportFailed(Conflict):
    code = "export_failed"
    title = _("This export failed")
