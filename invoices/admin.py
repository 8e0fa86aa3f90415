"""Staff read issued documents, never change them (the database refuses it anyway); the
exchange rates are the one thing staff maintain here. Amounts read as money ("25.20 USD"),
rates as percentages, times with their zone."""

from django.contrib import admin, messages
from django.template.defaultfilters import linebreaksbr
from django.utils.translation import gettext as gettext_now
from django.utils.translation import gettext_lazy as _

from core.admin import ReadOnlyAdmin, ReadOnlyInline, money_column, percent_column, when_column
from invoices.models import ExchangeRate, Invoice, InvoiceCounter, InvoiceLine, KsefSubmission
from invoices.selectors import invoices_held
from invoices.services import held_text, invoices_issue_missing

net = money_column("net", _("net"))
vat = money_column("vat", _("VAT"))
gross = money_column("gross", _("gross"))
vat_rate = percent_column("vat_rate", _("VAT rate"))


class InvoiceLineInline(ReadOnlyInline):
    model = InvoiceLine
    # Django shows callables in `fields` that are read-only too; the stubs allow only names.
    fields = readonly_fields = (  # type: ignore[assignment]
        "position", "facts", "quantity",
        money_column("unit_price", _("unit price (net)"), currency="invoice__currency"),
        money_column("net", _("net"), currency="invoice__currency"),
        percent_column("vat_rate", _("VAT rate")),
        money_column("vat", _("VAT"), currency="invoice__currency"),
        money_column("gross", _("gross"), currency="invoice__currency"),
    )  # fmt: skip

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("invoice")


class HeldWarning:
    """The invoices held for an exchange rate, said at the top of the list (staff pages)."""

    def changelist_view(self, request, extra_context=None):
        held = invoices_held()
        if held:
            messages.warning(request, linebreaksbr(held_text(held)))
        return super().changelist_view(request, extra_context)


@admin.register(Invoice)
class InvoiceAdmin(HeldWarning, ReadOnlyAdmin):
    list_display = ["display_number", "kind", "team", "issued_on", net, gross]
    list_filter = ["kind", "tax_treatment", "currency", "year"]
    search_fields = ["display_number", "team__name"]
    # Django shows callables in `fields` that are read-only too; the stubs allow only names.
    fields = readonly_fields = (  # type: ignore[assignment]
        "display_number", "kind", "team", "ledger_entry", "corrects",
        when_column("issued_at", _("issued at")), "issued_on", "sold_on", "seller", "buyer",
        "tax_treatment", vat_rate, net, vat, gross, "pln_rate", "pln_rate_on",
        "pln_rate_table", "reason", "legal_note",
    )  # fmt: skip
    inlines = [InvoiceLineInline]


@admin.register(InvoiceCounter)
class InvoiceCounterAdmin(ReadOnlyAdmin):
    list_display = ["series", "year", "last"]


@admin.register(KsefSubmission)
class KsefSubmissionAdmin(ReadOnlyAdmin):
    list_display = [
        "invoice", "status", "ksef_number", "attempts", when_column("sent_at", _("sent at")),
        when_column("updated_at", _("updated at")),
    ]  # fmt: skip
    list_filter = ["status"]


@admin.register(ExchangeRate)
class ExchangeRateAdmin(HeldWarning, admin.ModelAdmin):
    list_display = ["currency", "effective_on", "rate", "table_no"]
    list_filter = ["currency"]

    def save_model(self, request, obj, form, change):
        """A rate entered issues the invoices that waited for it, at once."""
        super().save_model(request, obj, form, change)
        issued = invoices_issue_missing()
        if issued:
            self.message_user(
                request,
                gettext_now("%(count)s held documents issued with this rate.") % {"count": issued},
                messages.SUCCESS,
            )
