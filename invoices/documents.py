"""The files a document is handed out as (PDF, FA(3) XML) and a month of them as one zip,
streamed: the zip is written as it goes, never held whole in memory."""

import zipfile

from django.http import HttpResponse, StreamingHttpResponse
from django.utils.translation import gettext as _

from invoices.errors import InvoiceNotNumbered
from invoices.fa3 import invoice_xml, xml_enabled
from invoices.pdf import invoice_pdf


def _name(invoice, ext: str) -> str:
    return invoice.display_number.replace("/", "-") + f".{ext}"


def _numbered(invoice) -> None:
    if not invoice.numbered:
        raise InvoiceNotNumbered(
            _("This document is being numbered; its files are ready within seconds.")
        )


def pdf_response(invoice) -> HttpResponse:
    _numbered(invoice)
    response = HttpResponse(invoice_pdf(invoice), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{_name(invoice, "pdf")}"'
    return response


def xml_response(invoice) -> HttpResponse:
    _numbered(invoice)
    response = HttpResponse(invoice_xml(invoice), content_type="application/xml")
    response["Content-Disposition"] = f'attachment; filename="{_name(invoice, "xml")}"'
    return response


class _Pipe:
    """A write-only file whose bytes the zip's generator takes as they come."""

    def __init__(self):
        self.chunks = []
        self.position = 0

    def write(self, data):
        self.chunks.append(bytes(data))
        self.position += len(data)
        return len(data)

    def tell(self):
        return self.position

    def flush(self):
        pass

    def take(self) -> bytes:
        out, self.chunks = b"".join(self.chunks), []
        return out


def _zip_chunks(invoices):
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, mode="w", compression=zipfile.ZIP_DEFLATED) as archive:
        xml = xml_enabled()
        for invoice in invoices:
            archive.writestr(_name(invoice, "pdf"), invoice_pdf(invoice))
            if xml:
                archive.writestr(_name(invoice, "xml"), invoice_xml(invoice))
            yield pipe.take()
    yield pipe.take()


def zip_response(invoices, *, month: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_zip_chunks(invoices), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="invoices-{month}.zip"'
    return response
