"""The fleet report's figures, for scripts: the fleet over time, use by model and region,
revenue, what is booked ahead and which allocations sit idle (`reports.selectors`)."""

from datetime import UTC, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.fields import BoundedDateTimeField
from core.problems import PROBLEM
from reports import selectors

RANGE_MAX = timedelta(days=400)


HOURLY_MAX = timedelta(days=31)


class RangeSerializer(serializers.Serializer):
    """`from` and `to` (default: the last 7 days), and the step of a series."""

    start = BoundedDateTimeField(required=False, help_text="default: 7 days before `to`")
    end = BoundedDateTimeField(required=False, help_text="default: now")
    step = serializers.ChoiceField(
        choices=["hour", "day"], required=False, help_text="default: hour up to 7 days"
    )

    def validate(self, data):
        end = data.get("end") or timezone.now()
        start = data.get("start") or end - timedelta(days=7)
        if start >= end:
            raise serializers.ValidationError({"from": _("`from` must be before `to`.")})
        if end - start > RANGE_MAX:
            raise serializers.ValidationError({"from": _("A range is at most 400 days.")})
        step = data.get("step") or ("hour" if end - start <= timedelta(days=7) else "day")
        if step == "hour" and end - start > HOURLY_MAX:
            raise serializers.ValidationError({"step": _("Hourly steps cover at most 31 days.")})
        return {"start": start, "end": end, "step": step}


def _range(request) -> dict:
    params = {k: request.query_params.get(q) for k, q in (("start", "from"), ("end", "to"))}
    params["step"] = request.query_params.get("step")
    data = RangeSerializer(data={k: v for k, v in params.items() if v})
    data.is_valid(raise_exception=True)
    return data.validated_data


RANGE_PARAMETERS = [
    OpenApiParameter("from", str, description="ISO 8601; default: 7 days before `to`"),
    OpenApiParameter("to", str, description="ISO 8601; default: now"),
]


class FleetPointSerializer(serializers.Serializer):
    t = serializers.DateTimeField()
    total = serializers.IntegerField(allow_null=True, help_text="null: no record then")
    reporting = serializers.IntegerField(
        allow_null=True,
        help_text="the fewest GPUs whose telemetry answered a polling round in the step "
        "(busy counts only these); null: no record then",
    )
    allocated = serializers.IntegerField()
    busy = serializers.IntegerField(
        allow_null=True,
        help_text="GPUs busy in the step; in a step not closed yet, those busy in its newest "
        "rolled-up minute (null: none of its minutes rolled up yet)",
    )
    busy_until = serializers.DateTimeField(
        required=False,
        help_text="only in a step not closed yet: the end of the minute its busy GPUs are "
        "read from (null: none rolled up yet)",
        allow_null=True,
    )


class StaffApi(APIView):
    permission_classes = [permissions.IsAdminUser]


class FleetUsageApi(StaffApi):
    """GPUs in the fleet (as recorded then), allocated and busy, per step; the newest step
    is read up to its newest rolled-up minute (`busy_until`)."""

    @extend_schema(
        parameters=[*RANGE_PARAMETERS, OpenApiParameter("step", str, enum=["hour", "day"])],
        responses={200: FleetPointSerializer(many=True), 400: PROBLEM, 403: PROBLEM},
    )
    def get(self, request):
        r = _range(request)
        step = timedelta(hours=1) if r["step"] == "hour" else timedelta(days=1)
        points = selectors.fleet_over_time(start=r["start"], end=r["end"], step=step)
        return Response(FleetPointSerializer(points, many=True).data)


# The bodies below are serializer classes, named in each view's schema and used by its
# code. They have no docstrings: a docstring would become the schema's description.


class UseRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    util = serializers.FloatField(allow_null=True)
    hours = serializers.FloatField()


class _UseApi(StaffApi):
    index = 0  # models, regions

    @extend_schema(
        parameters=RANGE_PARAMETERS,
        responses={200: UseRowSerializer(many=True), 400: PROBLEM},
    )
    def get(self, request):
        r = _range(request)
        rows = selectors.use_by_model_and_region(start=r["start"], end=r["end"])[self.index]
        return Response(UseRowSerializer(rows, many=True).data)


class ModelUsageApi(_UseApi):
    """Average utilisation and GPU-hours seen, per GPU model."""

    index = 0


class RegionUsageApi(_UseApi):
    """Average utilisation and GPU-hours seen, per region."""

    index = 1


class RevenueRowSerializer(serializers.Serializer):
    currency = serializers.CharField()
    period = serializers.CharField(source="period_name")
    amount = serializers.CharField()
    charges = serializers.IntegerField(source="bookings")


class RefundRowSerializer(serializers.Serializer):
    currency = serializers.CharField()
    amount = serializers.CharField()


class RevenueSerializer(serializers.Serializer):
    charges = RevenueRowSerializer(many=True)
    refunds = RefundRowSerializer(many=True)


class RevenueApi(StaffApi):
    """Charges per currency and rental period, refunds per currency (never added across
    currencies)."""

    @extend_schema(parameters=RANGE_PARAMETERS, responses={200: RevenueSerializer, 400: PROBLEM})
    def get(self, request):
        r = _range(request)
        charges, refunds, _credits = selectors.revenue(start=r["start"], end=r["end"])
        refunds = [{"currency": c, "amount": a} for c, a in sorted(refunds.items())]
        return Response(RevenueSerializer({"charges": charges, "refunds": refunds}).data)


class BookedDaySerializer(serializers.Serializer):
    day = serializers.DateField()
    gpu_days = serializers.FloatField()


class BookedAheadSerializer(serializers.Serializer):
    model = serializers.CharField(source="model.slug")
    capacity = serializers.IntegerField()
    days = BookedDaySerializer(many=True)
    as_of = serializers.DateTimeField(
        allow_null=True, default_timezone=UTC,
        help_text="`days` were read from the capacity read model as of this instant; null: "
        "read exactly from the holdings",
    )  # fmt: skip


class BookedAheadApi(StaffApi):
    """GPU-days booked per model for each of the next 30 days, against capacity."""

    @extend_schema(responses={200: BookedAheadSerializer(many=True)})
    def get(self, request):
        rows = selectors.booked_ahead(now=timezone.now())
        return Response(BookedAheadSerializer(rows, many=True).data)


class IdleAllocationSerializer(serializers.Serializer):
    allocation = serializers.UUIDField(source="id")
    owner = serializers.CharField()
    gpu_model = serializers.CharField(source="model_slug")
    node = serializers.CharField()
    paid_until = serializers.DateTimeField(default_timezone=UTC)  # as stored, in UTC


class IdleApi(StaffApi):
    """Running allocations whose GPUs have not been busy for two hours."""

    @extend_schema(responses={200: IdleAllocationSerializer(many=True)})
    def get(self, request):
        rows = selectors.idle_allocations(now=timezone.now())
        return Response(IdleAllocationSerializer(rows, many=True).data)
