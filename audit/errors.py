"""The audit log's refusals."""

from django.utils.translation import gettext_lazy as _

from core.errors import DomainError


class BadAuditFilter(DomainError):
    """A filter (action, dates, page link) the log cannot read; `errors` names each field."""

    code = "invalid"
    title = _("Invalid audit log filter")

    def __init__(self, errors: dict):
        field, message = next(iter(errors.items()))
        super().__init__(message, field=field)
        self.errors = {name: [str(text)] for name, text in errors.items()}
