"""The PDF reads back with its facts; every FA(3) XML validates against the official XSD;
an issued document refuses UPDATE and DELETE."""

import io
import re
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from lxml import etree
from pypdf import PdfReader

from invoices import fa3
from invoices.errors import XmlInvalid
from invoices.models import Invoice, InvoiceLine
from invoices.pdf import invoice_pdf
from tests.support.booking import book
from tests.support.factories.invoices import document

pytestmark = pytest.mark.django_db
NS = {"fa": "http://crd.gov.pl/wzor/2025/06/25/13775/"}


@pytest.fixture
def allocation(catalog, alice):
    return book(alice, model="h100", count=1, period="week")


def _text(pdf: bytes) -> str:
    text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    return " ".join(text.split())


def _xml(invoice) -> etree._Element:
    return etree.fromstring(fa3.invoice_xml(invoice))


def test_the_pdf_holds_number_parties_lines_and_totals(allocation):
    invoice = document(allocation, lines=((2, "100.00"), (1, "50.00")))
    text = _text(invoice_pdf(invoice))
    assert invoice.display_number in text
    assert "Faktura VAT / VAT invoice" in text
    assert "AnchorGPU Demo Sp. z o.o." in text and "ul. Żelazna 1" in text  # the seller
    assert "Kupiec Łódzki S.A." in text and "PL7740001454" in text  # the buyer
    assert "2 × H100 80GB na 1 tydzień" in text and "2 × H100 80GB for 1 week" in text
    assert "250,00 PLN" in text  # net
    assert "57,50 PLN" in text  # VAT
    assert "307,50 PLN" in text  # gross, to pay
    assert "PL61 1090 1014 0000 0712 1981 2874" in text


def test_a_credit_note_pdf_names_what_it_corrects_and_why(allocation):
    invoice = document(allocation)
    credit = document(allocation, corrects=invoice)
    text = _text(invoice_pdf(credit))
    assert "Faktura korygująca / Credit note" in text
    assert invoice.display_number in text and credit.display_number in text
    assert "cancelled before its start" in text
    assert "-246,00 PLN" in text.replace("−", "-")


def test_a_domestic_invoice_validates_against_the_xsd(allocation):
    root = _xml(document(allocation))
    assert root.findtext("fa:Fa/fa:P_13_1", namespaces=NS) == "200.00"
    assert root.findtext("fa:Fa/fa:P_14_1", namespaces=NS) == "46.00"
    assert root.findtext("fa:Fa/fa:P_15", namespaces=NS) == "246.00"
    assert root.findtext("fa:Fa/fa:RodzajFaktury", namespaces=NS) == "VAT"
    assert root.findtext("fa:Podmiot2/fa:DaneIdentyfikacyjne/fa:NIP", namespaces=NS) == "7740001454"


def test_a_reverse_charge_invoice_validates_with_np_ii_and_p_18(allocation):
    root = _xml(document(allocation, treatment="reverse_charge", currency="EUR"))
    assert root.findtext("fa:Fa/fa:KodWaluty", namespaces=NS) == "EUR"
    assert root.findtext("fa:Fa/fa:P_13_9", namespaces=NS) == "200.00"
    assert root.find("fa:Fa/fa:P_14_1", namespaces=NS) is None
    assert root.findtext("fa:Fa/fa:Adnotacje/fa:P_18", namespaces=NS) == "1"
    assert root.findtext("fa:Fa/fa:FaWiersz/fa:P_12", namespaces=NS) == "np II"
    assert (
        root.findtext("fa:Podmiot2/fa:DaneIdentyfikacyjne/fa:NrVatUE", namespaces=NS) == "136695976"
    )


def test_outside_the_eu_and_a_consumer_validate(allocation):
    root = _xml(document(allocation, treatment="outside_eu", currency="USD"))
    assert root.findtext("fa:Fa/fa:P_13_8", namespaces=NS) == "200.00"
    assert root.findtext("fa:Fa/fa:FaWiersz/fa:P_12", namespaces=NS) == "np I"
    consumer = _xml(document(allocation, treatment="consumer"))
    assert consumer.find("fa:Podmiot2/fa:DaneIdentyfikacyjne/fa:BrakID", namespaces=NS) is not None


def test_a_credit_note_is_kor_with_the_corrected_invoice(allocation):
    invoice = document(allocation)
    root = _xml(document(allocation, corrects=invoice))
    assert root.findtext("fa:Fa/fa:RodzajFaktury", namespaces=NS) == "KOR"
    assert root.findtext("fa:Fa/fa:DaneFaKorygowanej/fa:NrFaKorygowanej", namespaces=NS) == (
        invoice.display_number
    )
    assert root.findtext("fa:Fa/fa:P_13_1", namespaces=NS) == "-200.00"
    assert root.findtext("fa:Fa/fa:P_14_1", namespaces=NS) == "-46.00"
    assert root.findtext("fa:Fa/fa:P_15", namespaces=NS) == "-246.00"
    assert [
        r.findtext("fa:StanPrzed", namespaces=NS) for r in root.findall("fa:Fa/fa:FaWiersz", NS)
    ] == ["1", None]


def test_a_foreign_currency_invoice_carries_the_rate_and_vat_in_pln(allocation):
    invoice = document(allocation, currency="EUR", pln_rate=Decimal("4.2512"))
    root = _xml(invoice)
    assert root.findtext("fa:Fa/fa:KodWaluty", namespaces=NS) == "EUR"
    assert root.findtext("fa:Fa/fa:P_14_1W", namespaces=NS) == "195.56"  # 46.00 × 4.2512
    assert root.findtext("fa:Fa/fa:FaWiersz/fa:KursWaluty", namespaces=NS) == "4.2512"
    assert invoice.vat_in_pln() == Decimal("195.56")
    assert "1 EUR = 4.2512 PLN" in _text(invoice_pdf(invoice))


def test_a_document_the_schema_refuses_is_an_error_never_handed_out():
    with pytest.raises(XmlInvalid):
        fa3.validate(b"<Faktura xmlns='http://crd.gov.pl/wzor/2025/06/25/13775/'/>")


def test_an_issued_invoice_refuses_update_and_delete(allocation):
    invoice = document(allocation)
    for statement in (
        "UPDATE invoices_invoice SET gross = gross + 1 WHERE id = %s",
        "DELETE FROM invoices_invoice WHERE id = %s",
        "UPDATE invoices_invoiceline SET net = 0 WHERE invoice_id = %s",
        "DELETE FROM invoices_invoiceline WHERE invoice_id = %s",
    ):
        with (
            pytest.raises(IntegrityError, match="immutable"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement, [invoice.pk])
    fresh = Invoice.objects.get(pk=invoice.pk)
    assert fresh.gross == Decimal("246.00")
    assert InvoiceLine.objects.filter(invoice=invoice).count() == 1


def test_the_pdf_numbers_lines_from_1_as_the_xml_does(catalog, alice, pln_rates):
    """An invoice issued for a booking (its lines' positions are the quote's, from 0)."""
    from accounts.roles import acting_as
    from invoices.services import invoices_number
    from rentals.services import allocation_book, quote_create

    acting = acting_as(alice)
    quote = quote_create(
        acting=acting, gpu_model="h100", gpu_count=1, period="week", period_count=1,
        options=[{"option": "nvme-scratch", "quantity": 1}],
    )  # fmt: skip
    allocation = allocation_book(acting=acting, quote=quote)
    invoices_number()  # after the commit, by a worker
    invoice = Invoice.objects.get(ledger_entry__allocation=allocation)
    assert [line.position for line in invoice.lines.all()] == [0, 1]  # stored as quoted

    numbers = [
        r.findtext("fa:NrWierszaFa", namespaces=NS)
        for r in _xml(invoice).findall("fa:Fa/fa:FaWiersz", NS)
    ]
    text = _text(invoice_pdf(invoice))

    assert numbers == ["1", "2"]
    assert re.search(r"\b1 1 × H100 SXM na 1 tydzień", text), text
    assert re.search(r"\b2 Przestrzeń NVMe", text), text
    assert not re.search(r"\b0 1 × H100", text)
