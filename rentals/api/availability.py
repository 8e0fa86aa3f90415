"""GET /api/v1/availability/: what is free, where and when, before any quote."""

from datetime import UTC, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from catalog.models import GpuModel, Region, RentalPeriod
from catalog.software import Requires
from core.fields import BoundedDateTimeField
from rentals import limits
from rentals.api.serializers import PeriodCountField, RequiresVersionField
from rentals.selectors.availability import (
    WINDOW_NODES_SHOWN,
    availability_days_read,
    max_gpus_per_node,
    start_windows,
)

DAYS_MAX = 90


class AvailabilityQuerySerializer(serializers.Serializer):
    gpu_model = serializers.SlugField()
    gpu_count = serializers.IntegerField(
        min_value=1, max_value=limits.GPU_COUNT_MAX, required=False
    )
    node_count = serializers.IntegerField(min_value=1, max_value=64, required=False)
    period = serializers.SlugField(required=False, default="day")
    period_count = PeriodCountField(required=False, default=1)
    region = serializers.SlugField(required=False)
    requires_driver = RequiresVersionField(help_text="only nodes with at least this driver")
    requires_cuda = RequiresVersionField(
        help_text="only nodes whose driver supports at least this CUDA version"
    )
    requires_rocm = RequiresVersionField(help_text="only nodes with at least this ROCm")
    start = BoundedDateTimeField(required=False, help_text="default: now")
    end = BoundedDateTimeField(required=False, help_text="default and at most: 90 days later")

    def validate(self, data):
        model = GpuModel.objects.filter(slug=data["gpu_model"], is_active=True).first()
        if model is None:
            raise serializers.ValidationError({"gpu_model": _("Unknown GPU model.")})
        period = RentalPeriod.objects.filter(slug=data["period"], is_active=True).first()
        if period is None:
            raise serializers.ValidationError({"period": _("Unknown rental period.")})
        if "gpu_count" in data and "node_count" in data:
            raise serializers.ValidationError(_("Give `gpu_count` or `node_count`, not both."))
        region = None
        if data.get("region"):
            region = Region.objects.filter(slug=data["region"]).first()
            if region is None:
                raise serializers.ValidationError({"region": _("Unknown region.")})
        now = timezone.now()
        start = max(data.get("start") or now, now)
        end = data.get("end") or start + timedelta(days=DAYS_MAX)
        if end <= start:
            raise serializers.ValidationError({"to": _("`to` must be after `from`.")})
        if end - start > timedelta(days=DAYS_MAX):
            raise serializers.ValidationError({"to": _("A calendar covers at most 90 days.")})
        per_node = max_gpus_per_node(gpu_model=model)
        if data.get("gpu_count", 1) > per_node:
            raise serializers.ValidationError(
                {
                    "gpu_count": _("At most %(n)s GPUs of this model fit on one node.")
                    % {"n": per_node}
                }
            )
        return {**data, "model": model, "period_obj": period, "region_obj": region,
                "start": start, "end": end, "requires": Requires.of(data)}  # fmt: skip


# The answer's body, named in the view's schema and used by its code (no docstrings: they
# would become the schema's descriptions). Times in UTC, as stored.


class AvailabilityDaySerializer(serializers.Serializer):
    date = serializers.DateField()
    max_gpus_on_one_node = serializers.IntegerField()
    free_whole_nodes = serializers.IntegerField()
    free_gpus = serializers.IntegerField()


class AvailabilityWindowSerializer(serializers.Serializer):
    starts_at = serializers.DateTimeField(default_timezone=UTC)
    region = serializers.CharField()
    nodes = serializers.ListField(
        child=serializers.CharField(),
        help_text=f"hostnames of nodes the request fits on from `starts_at`, the fullest "
        f"first: at most {WINDOW_NODES_SHOWN} (for `node_count`, at least that many); "
        "`nodes_total` says how many there are",
    )
    nodes_total = serializers.IntegerField(
        help_text="how many nodes (whole nodes of the network group, for `node_count`) the "
        "request fits on from `starts_at`; `nodes` names the first of them"
    )
    as_of = serializers.DateTimeField(
        allow_null=True, default_timezone=UTC,
        help_text="this window (GPUs on one node from now) was read from the capacity read "
        "model as of this instant (the booking checks again); null: read exactly",
    )  # fmt: skip


class AvailabilitySerializer(serializers.Serializer):
    gpu_model = serializers.CharField()
    earliest_start = serializers.DateTimeField(allow_null=True, default_timezone=UTC)
    windows = AvailabilityWindowSerializer(many=True)
    days = AvailabilityDaySerializer(many=True)
    as_of = serializers.DateTimeField(
        allow_null=True, default_timezone=UTC,
        help_text="`days` were read from the capacity read model as of this instant (the "
        "booking checks again); null: read exactly from the holdings",
    )  # fmt: skip


def availability(data: dict) -> dict:
    model, region = data["model"], data["region_obj"]
    duration = data["period_obj"].duration * data["period_count"]
    windows = start_windows(
        gpu_model=model, duration=duration, not_before=data["start"],
        gpu_count=data.get("gpu_count", 1), node_count=data.get("node_count"),
        region_id=region.pk if region else None, requires=data["requires"], kept=True,
    )  # fmt: skip
    days = (data["end"] - data["start"]).days + 1
    rows, as_of = availability_days_read(
        gpu_model=model, start=data["start"], days=min(days, DAYS_MAX),
        region_id=region.pk if region else None, requires=data["requires"],
    )  # fmt: skip
    return {
        "gpu_model": model.slug,
        "earliest_start": windows[0]["starts_at"] if windows else None,
        "windows": windows,
        "days": rows,
        "as_of": as_of,
    }


class AvailabilityApi(APIView):
    """For the next 90 days, per day: the most GPUs free on one node, whole nodes free and
    GPUs free in all; and the next start times that fit the request (`gpu_count` GPUs on
    one node, or `node_count` whole nodes in one region), with where. Read from the same
    holds that booking checks, or, where a part carries `as_of`, from the capacity read
    model as of that instant: the booking checks again.

    For signed-in customers (a session or a token): what is free when is a fleet's
    occupancy, not a public page; the catalog's `free_gpus_now` is public."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "quote"

    @extend_schema(
        parameters=[AvailabilityQuerySerializer],
        responses={
            200: AvailabilitySerializer,
            400: OpenApiResponse(description="Problem details with field errors"),
            401: OpenApiResponse(description="Problem details"),
        },
    )
    def get(self, request):
        params = request.query_params.dict()
        for name, field in (("from", "start"), ("to", "end")):
            if name in params:
                params[field] = params.pop(name)
        query = AvailabilityQuerySerializer(data=params)
        query.is_valid(raise_exception=True)
        return Response(AvailabilitySerializer(availability(query.validated_data)).data)
