"""Errors that services raise; the API turns them into problem details, pages into messages."""

from django.utils.translation import gettext_lazy as _


class DomainError(Exception):
    """A refused operation that is the client's to fix or retry; nothing was changed."""

    status = 400
    code = "invalid"
    title = _("The request was refused")

    def __init__(self, detail, *, field=None, extra=None):
        super().__init__(str(detail))
        self.detail = detail
        self.field = field
        self.extra = extra or {}


class Conflict(DomainError):
    status = 409
    code = "conflict"
    title = _("The request conflicts with the current state")


class NoCapacity(Conflict):
    code = "no_capacity"
    title = _("Not enough free GPUs")

    def __init__(self, detail, *, earliest_start=None, field=None):
        extra = {"earliest_start": earliest_start.isoformat() if earliest_start else None}
        super().__init__(detail, field=field, extra=extra)
        self.earliest_start = earliest_start
