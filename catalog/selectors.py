"""Reads of the catalog: prices in force at an instant, and the models on offer."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, Max, OuterRef, Prefetch, QuerySet, Sum
from django.utils import timezone

from catalog.models import (
    GpuModel,
    GpuPrice,
    Node,
    NodeState,
    Option,
    OptionPrice,
    RentalPeriod,
)
from catalog.software import version_key
from core.versions import CATALOG_ROWS, versioned_copy


def gpu_price_at(*, gpu_model: GpuModel, period: RentalPeriod, at: datetime) -> GpuPrice | None:
    return (
        GpuPrice.objects.filter(gpu_model=gpu_model, period=period, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
    )


def option_price_at(
    *, option: Option, period: RentalPeriod | None, at: datetime
) -> OptionPrice | None:
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


def current_option_prices(
    *, options: Iterable[Option], at: datetime | None = None
) -> dict[int, list[OptionPrice]]:
    """The price rows in force per option (one per active period, or one for a one-time
    option), by option id, the periods shortest first: what the booking form shows beside
    each option. One query (DISTINCT ON)."""
    at = at or timezone.now()
    rows = (
        OptionPrice.objects.filter(option__in=options, effective_from__lte=at)
        .exclude(period__is_active=False)
        .select_related("period")
        .order_by("option_id", "period_id", "-effective_from")
        .distinct("option_id", "period_id")
    )
    prices: dict[int, list[OptionPrice]] = {}
    for row in rows:
        prices.setdefault(row.option_id, []).append(row)
    for found in prices.values():
        found.sort(key=lambda row: row.period.duration if row.period else timedelta(0))
    return prices


def gpu_model_list(
    *, filters: Mapping[str, Any] | None = None, at: datetime | None = None
) -> QuerySet[GpuModel]:
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


class PriceStatus:
    PAST = "past"
    CURRENT = "current"
    UPCOMING = "upcoming"


def price_rows_with_status(queryset: QuerySet[Any], *, at: datetime) -> QuerySet[Any]:
    """Price rows (`GpuPrice` or `OptionPrice`) annotated `superseded` (a later row of the
    same subject is in force at `at`); `price_status(row, at)` turns that into past, current
    or upcoming."""
    subject = ["period"] + (["gpu_model"] if queryset.model is GpuPrice else ["option"])
    later = queryset.model.objects.filter(
        **{name: OuterRef(name) for name in subject},
        effective_from__gt=OuterRef("effective_from"),
        effective_from__lte=at,
    )
    annotated: QuerySet[Any] = queryset.annotate(superseded=Exists(later))
    return annotated


def price_status(row: Any, *, at: datetime) -> str:
    """`row`: a price row from `price_rows_with_status`."""
    if row.effective_from > at:
        return PriceStatus.UPCOMING
    return PriceStatus.PAST if row.superseded else PriceStatus.CURRENT


def gpu_price_history(*, gpu_model: GpuModel, at: datetime | None = None) -> list[GpuPrice]:
    """Every price row of a model, newest first per period, each with its status at `at`."""
    at = at or timezone.now()
    rows = price_rows_with_status(
        GpuPrice.objects.filter(gpu_model=gpu_model, period__is_active=True)
        .select_related("period")
        .order_by("period__duration", "-effective_from"),
        at=at,
    )
    for row in rows:
        row.status = price_status(row, at=at)
    return list(rows)


@dataclass(frozen=True)
class CatalogRows:
    """What every quote looks up: the active models and periods by slug, and per model the
    most GPUs one active node has."""

    models: dict[str, GpuModel]
    periods: dict[str, RentalPeriod]
    gpus_per_node: dict[int, int]


def catalog_rows() -> CatalogRows:
    """`CatalogRows` from a copy in Redis that any catalog row saved or deleted invalidates
    (catalog.signals); bookings do not."""
    return versioned_copy(CATALOG_ROWS, _catalog_rows)


def _catalog_rows() -> CatalogRows:
    per_node = dict(
        Node.objects.filter(state=NodeState.ACTIVE)
        .values("gpu_model_id")
        .annotate(n=Max("gpu_count"))
        .values_list("gpu_model_id", "n")
    )
    return CatalogRows(
        models={m.slug: m for m in GpuModel.objects.filter(is_active=True)},
        periods={p.slug: p for p in RentalPeriod.objects.filter(is_active=True)},
        gpus_per_node=per_node,
    )


def software_by_model() -> dict[int, dict[str, Any]]:
    """Per model, the driver, CUDA and ROCm versions its active nodes run, each with the
    GPUs that have it and the regions (slugs) where; `unknown_gpus` on nodes whose stack no
    agent has reported. One grouped query, whatever the fleet's size."""
    rows = (
        Node.objects.filter(state=NodeState.ACTIVE, gpu_count__gt=0)
        .values("gpu_model_id", "region__slug", "driver_version", "cuda_version", "rocm_version")
        .annotate(gpu_total=Sum("gpu_count"))
        .order_by()
    )
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        model = found.setdefault(
            row["gpu_model_id"], {"drivers": {}, "cuda": {}, "rocm": {}, "unknown_gpus": 0}
        )
        if not (row["driver_version"] or row["cuda_version"] or row["rocm_version"]):
            model["unknown_gpus"] += row["gpu_total"]
        for part, name in (("drivers", "driver_version"), ("cuda", "cuda_version"),
                           ("rocm", "rocm_version")):  # fmt: skip
            if version := row[name]:
                entry = model[part].setdefault(version, {"version": version, "gpus": 0,
                                                         "regions": set()})  # fmt: skip
                entry["gpus"] += row["gpu_total"]
                entry["regions"].add(row["region__slug"])
    for model in found.values():
        for part in ("drivers", "cuda", "rocm"):
            model[part] = [
                {**entry, "regions": sorted(entry["regions"])}
                for entry in sorted(
                    model[part].values(), key=lambda e: version_key(e["version"]), reverse=True
                )
            ]
    return found


def software_unknown() -> dict[str, Any]:
    return {"drivers": [], "cuda": [], "rocm": [], "unknown_gpus": 0}


def stacks_by_model() -> list[dict[str, Any]]:
    """Each active model's software stacks: per (driver, CUDA, ROCm) its GPUs on active
    nodes and the regions (slugs) where; a model no agent reported on has one unknown
    stack (all empty). One grouped query; models by name, stacks newest first."""
    rows = (
        Node.objects.filter(state=NodeState.ACTIVE, gpu_count__gt=0, gpu_model__is_active=True)
        .values("gpu_model_id", "driver_version", "cuda_version", "rocm_version", "region__slug")
        .annotate(gpu_total=Sum("gpu_count"))
        .order_by()
    )
    stacks: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = (row["gpu_model_id"], row["driver_version"], row["cuda_version"], row["rocm_version"])
        entry = stacks.setdefault(key, {"gpus": 0, "regions": set()})
        entry["gpus"] += row["gpu_total"]
        entry["regions"].add(row["region__slug"])
    models = {m.pk: m for m in GpuModel.objects.filter(pk__in={k[0] for k in stacks})}

    def order(key: tuple[Any, ...]) -> tuple[str, list[int], list[int]]:
        _model, driver, cuda, rocm = key
        newest = [version_key(v) if v else [-1] for v in (cuda or rocm, driver)]
        return (models[key[0]].name, [-p for p in newest[0]], [-p for p in newest[1]])

    return [
        {"gpu_model": models[key[0]], "driver": key[1], "cuda": key[2], "rocm": key[3],
         "gpus": entry["gpus"], "regions": sorted(entry["regions"])}
        for key, entry in sorted(stacks.items(), key=lambda item: order(item[0]))
    ]  # fmt: skip
