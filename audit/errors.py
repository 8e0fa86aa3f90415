"""The audit log's refusals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy as _

from core.errors import DomainError

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


class BadAuditFilter(DomainError):
    """A filter (action, dates, page link) the log cannot read; `errors` names each field."""

    code = "invalid"
    title = _("Invalid audit log filter")

    def __init__(self, errors: dict[str, StrOrPromise]) -> None:
        field, message = next(iter(errors.items()))
        super().__init__(message, field=field)
        self.errors = {name: [str(text)] for name, text in errors.items()}
