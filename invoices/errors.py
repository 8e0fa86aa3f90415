"""The invoices app's refusals."""

from django.utils.translation import gettext_lazy as _

from core.errors import DomainError


class InvoiceNotFound(DomainError):
    status = 404
    code = "invoice_not_found"
    title = _("No such invoice")


class BadMonth(DomainError):
    code = "bad_month"
    title = _("The month is not valid")


class XmlInvalid(DomainError):
    """An FA(3) document that fails the official schema: never handed out."""

    status = 500
    code = "invoice_xml_invalid"
    title = _("The e-invoice failed the FA(3) schema")


class XmlNotApplicable(DomainError):
    status = 409
    code = "invoice_xml_not_applicable"
    title = _("No FA(3) e-invoice for this seller")


class InvoiceNotNumbered(DomainError):
    """Numbered within seconds of its commit (invoices.sql.NUMBER): no file without a number."""

    status = 409
    code = "invoice_being_numbered"
    title = _("The invoice is being numbered")
