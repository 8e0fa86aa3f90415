"""The team's invoices and credit notes in the API: the list (by month and kind), each as
PDF and FA(3) XML, and a month of them as one zip."""

from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.views import APIView

from accounts.roles import acting_for_request
from core.problems import PROBLEM
from invoices import documents, selectors
from invoices.api.serializers import (
    InvoiceFilterSerializer,
    InvoiceSerializer,
    InvoiceZipQuerySerializer,
)
from invoices.models import InvoiceLine


class _FileRenderer(BaseRenderer):
    """The views build the file themselves; refusals stay JSON problem details."""

    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, bytes | str):
            return data
        return JSONRenderer().render(data)


class PdfRenderer(_FileRenderer):
    media_type, format = "application/pdf", "pdf"


class XmlRenderer(_FileRenderer):
    media_type, format = "application/xml", "xml"


class ZipRenderer(_FileRenderer):
    media_type, format = "application/zip", "zip"


def _file(media_type, description):
    return {
        (200, media_type): OpenApiResponse(OpenApiTypes.BINARY, description=description),
        401: PROBLEM,
        403: PROBLEM,
        404: PROBLEM,
    }


class InvoiceListApi(generics.ListAPIView):
    serializer_class = InvoiceSerializer

    def get_queryset(self):
        filters = InvoiceFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.invoice_list(
            acting=acting_for_request(self.request), **filters.validated_data
        ).prefetch_related(Prefetch("lines", queryset=InvoiceLine.objects.order_by("position")))

    @extend_schema(parameters=[InvoiceFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class InvoicePdfApi(APIView):
    renderer_classes = [PdfRenderer, JSONRenderer]

    @extend_schema(
        responses={
            **_file(
                PdfRenderer.media_type, "the invoice or credit note as PDF (Polish and English)"
            ),
            409: PROBLEM,  # still being numbered (within seconds of its commit)
        }
    )
    def get(self, request, pk: int):
        return documents.pdf_response(
            selectors.invoice_get(acting=acting_for_request(request), pk=pk)
        )


class InvoiceXmlApi(APIView):
    renderer_classes = [XmlRenderer, JSONRenderer]

    @extend_schema(
        responses={
            **_file(
                XmlRenderer.media_type, "the FA(3) e-invoice, valid against the official schema"
            ),
            409: PROBLEM,
        }
    )
    def get(self, request, pk: int):
        return documents.xml_response(
            selectors.invoice_get(acting=acting_for_request(request), pk=pk)
        )


class InvoiceZipApi(APIView):
    renderer_classes = [ZipRenderer, JSONRenderer]

    @extend_schema(
        parameters=[InvoiceZipQuerySerializer],
        responses={
            **_file(
                ZipRenderer.media_type,
                "one month's documents (PDF, and FA(3) XML for a Polish seller)",
            ),
            400: PROBLEM,
        },
    )
    def get(self, request):
        query = InvoiceZipQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = query.validated_data.get("month") or selectors.this_month()
        invoices = selectors.invoice_documents(acting=acting_for_request(request), month=month)
        return documents.zip_response(invoices, month=month)
