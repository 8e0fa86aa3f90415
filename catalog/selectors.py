"""Reads of the catalog: prices in force at an instant, and the models on offer."""

from datetime import datetime

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from catalog.models import GpuModel, GpuPrice, Option, OptionPrice, RentalPeriod


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


def gpu_model_list(*, filters: dict | None = None, at: datetime | None = None):
    """Active models, filtered and ordered, with the prices in force prefetched
    (`current_prices`): two queries whatever the number of models."""
    at = at or timezone.now()
    models = GpuModel.objects.filter(is_active=True)
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
