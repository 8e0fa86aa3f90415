"""The invoices page (owner and billing roles): the team's invoices and credit notes by
month and kind, each with its PDF and FA(3) XML, and a month of them as one zip."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from accounts.roles import acting_for_request
from invoices import documents, selectors
from invoices.errors import BadMonth
from invoices.fa3 import xml_enabled
from invoices.models import InvoiceKind, PaymentStatus

PAGE_SIZE = 50


class InvoiceFilterForm(forms.Form):
    month = forms.CharField(
        label=_("Month"), required=False, max_length=7,
        widget=forms.TextInput(attrs={"type": "month", "placeholder": "2026-11"}),
    )  # fmt: skip
    kind = forms.ChoiceField(
        label=_("Kind"), required=False, choices=[("", _("all"))] + InvoiceKind.choices
    )

    def clean_month(self):
        month = self.cleaned_data["month"]
        selectors.month_parse(month)  # a refusal is the field's error
        return month


def _filters(request):
    form = InvoiceFilterForm(request.GET or None)
    try:
        valid = form.is_valid()
    except BadMonth as exc:
        form.add_error("month", str(exc.detail))
        valid = False
    return form, (form.cleaned_data if valid else {})


@login_required
def invoices_page(request):
    acting = acting_for_request(request)
    form, filters = _filters(request)
    qs = selectors.invoice_list(acting=acting, month=filters.get("month"), kind=filters.get("kind"))
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    invoices = list(page.object_list)
    for invoice in invoices:  # words for the payment facts with_payment_facts read
        if invoice.kind == InvoiceKind.INVOICE:
            invoice.payment_words = PaymentStatus(selectors.payment_status_of(invoice)).label
            invoice.paid_on_day = selectors.paid_on_of(invoice)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "invoices/invoice_list.html",
        {
            "form": form,
            "page": page,
            "invoices": invoices,
            "query": query.urlencode(),
            "month": filters.get("month") or "",
            "xml": xml_enabled(),
            "held": selectors.invoices_held_for(acting=acting),
            "nav": "invoices",
        },
        status=400 if form.errors else 200,
    )


@login_required
def invoice_pdf_page(request, pk):
    invoice = selectors.invoice_get(acting=acting_for_request(request), pk=pk)
    return documents.pdf_response(invoice)


@login_required
def invoice_xml_page(request, pk):
    invoice = selectors.invoice_get(acting=acting_for_request(request), pk=pk)
    return documents.xml_response(invoice)


@login_required
def invoices_zip_page(request):
    month = request.GET.get("month", "")
    invoices = selectors.invoice_documents(acting=acting_for_request(request), month=month)
    return documents.zip_response(invoices, month=month)
