from django.urls import reverse
from rest_framework import serializers

from invoices.models import Invoice, InvoiceKind, InvoiceLine
from invoices.texts import line_both


class InvoiceFilterSerializer(serializers.Serializer):
    month = serializers.RegexField(
        r"^\d{4}-(0[1-9]|1[0-2])$", required=False, help_text="YYYY-MM, by issue date"
    )
    kind = serializers.ChoiceField(choices=InvoiceKind.choices, required=False)


class InvoiceZipQuerySerializer(serializers.Serializer):
    month = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$", help_text="YYYY-MM, by issue date")


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
    corrects = serializers.CharField(
        source="corrects.display_number", default=None, allow_null=True
    )
    ksef_status = serializers.SerializerMethodField()
    ksef_number = serializers.SerializerMethodField()
    pdf = serializers.SerializerMethodField()
    xml = serializers.SerializerMethodField()
    lines = InvoiceLineSerializer(many=True)

    class Meta:
        model = Invoice
        fields = [
            "id", "kind", "display_number", "series", "year", "number", "issued_at",
            "issued_on", "sold_on", "corrects", "corrects_id", "reason", "tax_treatment",
            "vat_rate", "currency", "net", "vat", "gross", "legal_note", "seller", "buyer",
            "ksef_status", "ksef_number", "pdf", "xml", "lines",
        ]  # fmt: skip

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
