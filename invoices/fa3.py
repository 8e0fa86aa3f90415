"""The FA(3) e-invoice (KSeF's structure) of an issued document, for a Polish seller.

Built with `ksef-client`'s FA(3) builders and checked, every time, against the official
schema that package ships (`schemat_FA(3)_v1-0E.xsd`) with lxml: a document that fails it
is an error (`XmlInvalid`), never handed out.

How our treatments map onto FA(3):
- domestic and consumer: the line's rate (23), P_13_1 / P_14_1;
- reverse charge (an EU business, services of art. 28b): P_12 "np II", P_13_9, P_18 = 1
  ("odwrotne obciążenie");
- outside the EU: P_12 "np I", P_13_8, P_18 = 2;
- a foreign currency with Polish VAT: KodWaluty, each line's KursWaluty (the invoice's copied
  staff-entered rate, `ExchangeRate`) and the VAT in PLN (P_14_1W);
- a credit note: RodzajFaktury KOR with DaneFaKorygowanej and PrzyczynaKorekty, each corrected
  line shown as before (StanPrzed) and after the correction (worth nothing after).
"""

from decimal import Decimal
from functools import cache
from pathlib import Path

import ksef_client.documents.fa3 as ksef_fa3
from django.conf import settings
from ksef_client.documents.fa3 import (
    Address,
    BasicInvoiceBuilder,
    CorrectionInvoiceBuilder,
    InvoiceLine,
    InvoiceParty,
    PartyIdentifier,
    TaxCategory,
)
from ksef_client.documents.fa3.xml import invoice_to_xml
from lxml import etree

from core.vat import TaxTreatment
from invoices.errors import XmlInvalid, XmlNotApplicable
from invoices.models import Invoice, KsefStatus
from invoices.selectors import paid_on_of, with_payment_facts
from invoices.texts import line_both, reason_text

SCHEMA_FILE = "schemat_FA(3)_v1-0E.xsd"
EU = frozenset(
    [
        "AT",
        "BE",
        "BG",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GR",
        "HR",
        "HU",
        "IE",
        "IT",
        "LT",
        "LU",
        "LV",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
    ]
)


class _Bundled(etree.Resolver):
    """The schema's imports (crd.gov.pl URLs) read from the files the package ships: the
    validation never reaches the network."""

    def __init__(self, folder: Path):
        super().__init__()
        self.folder = folder

    def resolve(self, url, pubid, context):
        local = self.folder / Path(url).name
        if local.exists():
            return self.resolve_filename(str(local), context)
        return None


@cache
def schema() -> etree.XMLSchema:
    folder = Path(ksef_fa3.__file__).parent / "schemas"
    parser = etree.XMLParser(no_network=True)
    parser.resolvers.add(_Bundled(folder))
    return etree.XMLSchema(etree.parse(str(folder / SCHEMA_FILE), parser))


def validate(xml: bytes) -> None:
    """Refuse a document the official FA(3) schema refuses."""
    try:
        document = etree.fromstring(xml)
    except etree.XMLSyntaxError as exc:
        raise XmlInvalid(f"not XML: {exc}") from exc
    checker = schema()
    if not checker.validate(document):
        raise XmlInvalid("; ".join(str(e) for e in checker.error_log)[:2000])


def _address(details: dict) -> Address | None:
    lines = [line.strip() for line in (details.get("address") or "").splitlines() if line.strip()]
    if not lines:
        return None
    country = details.get("country") or "PL"
    return Address(line1=lines[0], line2=", ".join(lines[1:]) or None, country_code=country)


def _bare(vat_id: str, country: str) -> str:
    vat_id = (vat_id or "").replace(" ", "").replace("-", "").upper()
    prefix = "EL" if country == "GR" else country
    return vat_id[len(prefix) :] if prefix and vat_id.startswith(prefix) else vat_id


def _seller(details: dict) -> InvoiceParty:
    return InvoiceParty.polish_company(
        nip=_bare(details["vat_id"], "PL"), name=details["name"], address=_address(details)
    )


def _buyer(details: dict) -> InvoiceParty:
    country = details.get("country") or "PL"
    name = details.get("name") or details.get("team") or "-"
    vat_id = details.get("vat_id") or ""
    address = _address(details)
    if not details.get("name") or not vat_id:  # a consumer, or a business without an id
        return InvoiceParty(name=name, identifier=PartyIdentifier.none(), address=address)
    if country == "PL":
        return InvoiceParty.polish_company(nip=_bare(vat_id, "PL"), name=name, address=address)
    if country in EU:
        return InvoiceParty.eu_company(
            vat_id=_bare(vat_id, country), country_code="EL" if country == "GR" else country,
            name=name, address=address,
        )  # fmt: skip
    return InvoiceParty.foreign_company(
        identifier=vat_id, country_code=country, name=name, address=address
    )


def _tax(invoice: Invoice) -> TaxCategory:
    if invoice.tax_treatment == TaxTreatment.REVERSE_CHARGE:
        return TaxCategory.service_article_100()  # np II, P_13_9
    if invoice.tax_treatment == TaxTreatment.OUTSIDE_EU:
        return TaxCategory.outside_country()  # np I, P_13_8
    rate = (Decimal(invoice.vat_rate) * 100).normalize()
    if rate == 23:
        return TaxCategory.standard_23()
    if rate == 0:
        return TaxCategory.zero_domestic()
    raise XmlInvalid(f"no FA(3) rate for {rate} %")


def _row(line, *, tax, rate, worthless: bool = False) -> dict:
    """One FA(3) row's values. A credit note's rows are the corrected values as they were
    (its own lines negated back) and, `worthless`, as they are after the correction."""
    pl, en = line_both(line.facts)
    zero = Decimal(0)
    return {
        "description": f"{pl} / {en}",
        "quantity": abs(Decimal(line.quantity)),
        "unit_net_price": zero if worthless else Decimal(line.unit_price),
        "tax": tax,
        "unit": "usł.",
        "vat_amount": (zero if worthless else abs(Decimal(line.vat))) if tax.vat_rate else None,
        "currency_rate": rate,
    }


def _line(values: dict) -> InvoiceLine:
    values = dict(values)
    return InvoiceLine.service(values.pop("description"), **values)


def invoice_xml(invoice: Invoice) -> bytes:
    """The document's FA(3) XML, validated against the official schema."""
    if invoice.seller.get("country") != "PL":
        raise XmlNotApplicable("FA(3) e-invoices are for a Polish seller.")
    tax = _tax(invoice)
    rate = Decimal(invoice.pln_rate) if invoice.pln_rate is not None else None
    lines = list(invoice.lines.all())
    builder: CorrectionInvoiceBuilder | BasicInvoiceBuilder
    if invoice.is_credit_note:
        corrected = invoice.corrects
        assert corrected is not None  # invoices_invoice_credit_note_corrects
        builder = CorrectionInvoiceBuilder(invoice_number=invoice.display_number)
        ksef = getattr(corrected, "ksef", None)
        builder.corrects_invoice(
            number=corrected.display_number,
            issue_date=corrected.issued_on,
            reason=reason_text(invoice.reason) or "-",
            ksef_number=ksef.ksef_number if ksef and ksef.status == KsefStatus.ACCEPTED else None,
        )
        for line in lines:
            builder.add_corrected_line_before_after(
                before=_line(_row(line, tax=tax, rate=rate)),
                after=_line(_row(line, tax=tax, rate=rate, worthless=True)),
            )
    else:
        builder = BasicInvoiceBuilder(invoice_number=invoice.display_number)
        for line in lines:
            values = _row(line, tax=tax, rate=rate)
            builder.add_service_line(values.pop("description"), **values)
    builder.issued_on(invoice.issued_on).sale_date(invoice.sold_on).currency(invoice.currency)
    builder.seller(_seller(invoice.seller)).buyer(_buyer(invoice.buyer))
    if invoice.tax_treatment == TaxTreatment.REVERSE_CHARGE:
        builder.reverse_charge()
    if not invoice.is_credit_note:
        # Platnosc: paid, with its date (a card's capture, a transfer in full); else the
        # due date of an invoiced team's invoice.
        facts = with_payment_facts(Invoice.objects.filter(pk=invoice.pk)).first()
        paid_on = paid_on_of(facts) if facts is not None else None
        if paid_on is not None:
            builder.paid(paid_on)
        elif invoice.due_on is not None:
            builder.payment_due(invoice.due_on)
    if invoice.seller.get("bank_account"):
        builder.bank_account(invoice.seller["bank_account"].replace(" ", ""))
    try:
        xml = invoice_to_xml(builder.build())
    except ValueError as exc:  # the builder's own checks (FA3XmlValidationError is one)
        raise XmlInvalid(str(exc)) from exc
    validate(xml)
    return xml


def xml_enabled() -> bool:
    return settings.ANCHORGPU["SELLER"]["COUNTRY"] == "PL"
