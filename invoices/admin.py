"""Staff read issued documents, never change them (the database refuses it anyway); the
exchange rates are the one thing staff maintain here."""

from django.contrib import admin

from core.admin import ReadOnlyAdmin, ReadOnlyInline
from invoices.models import ExchangeRate, Invoice, InvoiceCounter, InvoiceLine, KsefSubmission


class InvoiceLineInline(ReadOnlyInline):
    model = InvoiceLine
    fields = ["position", "facts", "quantity", "unit_price", "net", "vat_rate", "vat", "gross"]


@admin.register(Invoice)
class InvoiceAdmin(ReadOnlyAdmin):
    list_display = [
        "display_number",
        "kind",
        "team",
        "issued_on",
        "currency",
        "net",
        "vat",
        "gross",
    ]
    list_filter = ["kind", "tax_treatment", "currency", "year"]
    search_fields = ["display_number", "team__name"]
    inlines = [InvoiceLineInline]


@admin.register(InvoiceCounter)
class InvoiceCounterAdmin(ReadOnlyAdmin):
    list_display = ["series", "year", "last"]


@admin.register(KsefSubmission)
class KsefSubmissionAdmin(ReadOnlyAdmin):
    list_display = ["invoice", "status", "ksef_number", "attempts", "sent_at", "updated_at"]
    list_filter = ["status"]


@admin.register(ExchangeRate)
class ExchangeRateAdmin(admin.ModelAdmin):
    list_display = ["currency", "effective_on", "rate", "table_no"]
    list_filter = ["currency"]
