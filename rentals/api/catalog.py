"""The offer in the API: GPU models with their prices in force and GPUs free now."""

from django.http import HttpResponse, HttpResponseNotModified
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions

from core.problems import PROBLEM
from rentals.api.serializers import GpuModelFilterSerializer, GpuModelSerializer
from rentals.selectors.availability import gpu_model_offers
from rentals.selectors.catalog import catalog_answer


class GpuModelListApi(generics.ListAPIView):
    """GPU models with specs, the price in force per period, and GPUs free now."""

    permission_classes = [permissions.AllowAny]
    serializer_class = GpuModelSerializer

    def get_queryset(self):
        filters = GpuModelFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return gpu_model_offers(filters=filters.validated_data)

    @extend_schema(
        parameters=[GpuModelFilterSerializer],
        responses={200: GpuModelSerializer(many=True), 304: None, 400: PROBLEM},
    )
    def get(self, request, *args, **kwargs):
        """Answered from the catalog read model (rentals.selectors.catalog); `ETag` on every
        answer, `304 Not Modified` to a client that sends it back in `If-None-Match`."""
        body, etag = catalog_answer(
            request.build_absolute_uri(), lambda: super(GpuModelListApi, self).get(
                request, *args, **kwargs
            ).data,
        )  # fmt: skip
        if etag in request.headers.get("If-None-Match", ""):
            response = HttpResponseNotModified()
        else:  # the stored bytes: JSON is this API's only representation
            response = HttpResponse(body, content_type="application/json")
        response["ETag"] = etag
        response["Cache-Control"] = "no-cache"  # keep it, but ask again each time
        return response
