"""Reads of the catalog: prices in force at an instant, models with their offer, free GPUs."""

from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from catalog.models import Gpu, GpuModel, GpuPrice, NodeState, Option, OptionPrice, RentalPeriod


def gpu_price_at(*, gpu_model: GpuModel, period: RentalPeriod, at: datetime) -> GpuPrice | None:
    return (
        GpuPrice.objects.filter(gpu_model=gpu_model, period=period, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
    )


def option_price_at(*, option: Option, period: RentalPeriod | None, at: datetime):
    return (
        OptionPrice.objects.filter(option=option, period=period, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
    )


def current_gpu_prices(*, at: datetime | None = None) -> QuerySet[GpuPrice]:
    """The price row in force per (model, period), in one query (DISTINCT ON)."""
    at = at or timezone.now()
    return (
        GpuPrice.objects.filter(effective_from__lte=at, period__is_active=True)
        .select_related("period")
        .order_by("gpu_model_id", "period_id", "-effective_from")
        .distinct("gpu_model_id", "period_id")
    )


def busy_gpus_q(*, starts_at: datetime, ends_at: datetime, gpu_ref="pk") -> Exists:
    from rentals.models import AllocationGpu

    return Exists(
        AllocationGpu.objects.filter(
            gpu=OuterRef(gpu_ref), released=False, starts_at__lt=ends_at, ends_at__gt=starts_at
        )
    )


def gpu_model_list(*, filters: dict | None = None, at: datetime | None = None):
    """Active models with current prices prefetched and `free_gpus_now` annotated.

    Three queries whatever the number of models: models (+ free count), prices, periods.
    """
    at = at or timezone.now()
    from rentals.models import AllocationGpu

    busy_now = AllocationGpu.objects.filter(
        released=False, starts_at__lte=at, ends_at__gt=at
    ).values("gpu_id")
    models = GpuModel.objects.filter(is_active=True).annotate(
        free_gpus_now=Count(
            "nodes__gpus",
            filter=Q(nodes__state=NodeState.ACTIVE) & ~Q(nodes__gpus__in=busy_now),
            distinct=True,
        )
    )
    filters = filters or {}
    if vendor := filters.get("vendor"):
        models = models.filter(vendor=vendor)
    if (min_memory := filters.get("min_memory_gb")) is not None:
        models = models.filter(memory_gb__gte=min_memory)
    if stack := filters.get("stack"):
        models = models.filter(stack=stack)
    if filters.get("fp8") is not None:
        models = models.filter(fp8=filters["fp8"])
    if (max_price := filters.get("max_price")) is not None:
        period = filters.get("price_period")
        price_q = current_gpu_prices(at=at).filter(unit_price__lte=max_price)
        if period:
            price_q = price_q.filter(period__slug=period)
        models = models.filter(pk__in=[p.gpu_model_id for p in price_q])
    ordering = filters.get("ordering") or "-memory_gb"
    models = models.order_by(ordering, "name")
    return models.prefetch_related(
        Prefetch("prices", queryset=current_gpu_prices(at=at), to_attr="current_prices")
    )


def free_gpus(*, gpu_model: GpuModel, starts_at: datetime, ends_at: datetime) -> QuerySet[Gpu]:
    """GPUs of active nodes of the model that no live allocation holds in [starts_at, ends_at)."""
    return (
        Gpu.objects.filter(node__gpu_model=gpu_model, node__state=NodeState.ACTIVE)
        .exclude(busy_gpus_q(starts_at=starts_at, ends_at=ends_at))
        .order_by("node_id", "index")
    )


def max_gpus_per_node(*, gpu_model: GpuModel) -> int:
    counts = (
        Gpu.objects.filter(node__gpu_model=gpu_model, node__state=NodeState.ACTIVE)
        .values("node_id")
        .annotate(n=Count("id"))
        .values_list("n", flat=True)
    )
    return max(counts, default=0)
