from datetime import date

from django.urls import reverse
from rest_framework import serializers

from invoices.models import Invoice, InvoiceKind, InvoiceLine, InvoiceState, PaymentStatus
from invoices.selectors import paid_on_of, payment_status_of
from invoices.texts import line_both


class InvoiceFilterSerializer(serializers.Serializer):
    month = serializers.RegexField(
        r"^\d{4}-(0[1-9]|1[0-2])$", required=False, help_text="YYYY-MM, by issue date"
    )
    kind = serializers.ChoiceField(choices=InvoiceKind.choices, required=False)


class InvoiceZipQuerySerializer(serializers.Serializer):
    month = serializers.RegexField(
        r"^\d{4}-(0[1-9]|1[0-2])$", required=False,
        help_text="YYYY-MM, by issue date; empty: this month (in INVOICE_TIME_ZONE)",
    )  # fmt: skip


class InvoiceLineSerializer(serializers.ModelSerializer):
    description_pl = serializers.SerializerMethodField()
    description_en = serializers.SerializerMethodField()

    class Meta:
        model = InvoiceLine
        fields = [
            "position", "description_pl", "description_en", "quantity", "unit_price", "net",
            "vat_rate", "vat", "gross",
        ]  # fmt: skip

    def get_description_pl(self, line) -> str:
        return line_both(line.facts)[0]

    def get_description_en(self, line) -> str:
        return line_both(line.facts)[1]


class InvoiceSerializer(serializers.ModelSerializer):
    display_number = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()
    corrects = serializers.CharField(
        source="corrects.display_number", default=None, allow_null=True
    )
    ksef_status = serializers.SerializerMethodField()
    ksef_number = serializers.SerializerMethodField()
    pdf = serializers.SerializerMethodField()
    xml = serializers.SerializerMethodField()
    lines = InvoiceLineSerializer(many=True)
    payment_status = serializers.SerializerMethodField()
    paid_on = serializers.SerializerMethodField()
    allocations = serializers.SerializerMethodField()

    class Meta:
        model = Invoice
        fields = [
            "id", "kind", "state", "display_number", "series", "year", "number", "issued_at",
            "issued_on", "sold_on", "corrects", "corrects_id", "reason", "tax_treatment",
            "vat_rate", "currency", "net", "vat", "gross", "legal_note", "seller", "buyer",
            "ksef_status", "ksef_number", "pdf", "xml", "lines", "payment_status", "due_on",
            "paid_on", "allocations",
        ]  # fmt: skip

    def get_display_number(self, invoice) -> str | None:
        """None while the document is being numbered (within seconds of its commit)."""
        return invoice.display_number or None

    def get_state(self, invoice) -> InvoiceState:
        return InvoiceState.ISSUED if invoice.numbered else InvoiceState.BEING_NUMBERED

    def get_payment_status(self, invoice) -> PaymentStatus:
        return payment_status_of(invoice)

    def get_paid_on(self, invoice) -> date | None:
        return paid_on_of(invoice)

    def get_allocations(self, invoice) -> list[str]:
        allocation = getattr(invoice, "allocation_id", None)
        return [str(allocation)] if allocation else []

    def get_ksef_status(self, invoice) -> str | None:
        ksef = getattr(invoice, "ksef", None)
        return ksef.status if ksef else None

    def get_ksef_number(self, invoice) -> str | None:
        ksef = getattr(invoice, "ksef", None)
        return ksef.ksef_number or None if ksef else None

    def get_pdf(self, invoice) -> str:
        return reverse("api-invoice-pdf", args=[invoice.pk])

    def get_xml(self, invoice) -> str:
        return reverse("api-invoice-xml", args=[invoice.pk])
