"""Availability: which GPUs are free when, how many a model offers now, where a request
fits and the earliest start when nothing fits now. Reads only; placement.py locks."""

from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from catalog.models import Gpu, GpuModel, NodeState
from catalog.selectors import gpu_model_list
from rentals.models import AllocationGpu

MAX_START_CANDIDATES = 500


def busy_gpus_q(*, starts_at: datetime, ends_at: datetime, gpu_ref="pk") -> Exists:
    return Exists(
        AllocationGpu.objects.filter(
            gpu=OuterRef(gpu_ref), released=False, starts_at__lt=ends_at, ends_at__gt=starts_at
        )
    )


def gpu_model_offers(*, filters: dict | None = None, at: datetime | None = None):
    """The catalog's models with `free_gpus_now`: three queries whatever the number of models
    (models with the free count, prices, periods)."""
    at = at or timezone.now()
    busy_now = AllocationGpu.objects.filter(
        released=False, starts_at__lte=at, ends_at__gt=at
    ).values("gpu_id")
    return gpu_model_list(filters=filters, at=at).annotate(
        free_gpus_now=Count(
            "nodes__gpus",
            filter=Q(nodes__state=NodeState.ACTIVE) & ~Q(nodes__gpus__in=busy_now),
            distinct=True,
        )
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


def candidate_nodes(*, gpu_model: GpuModel, gpu_count: int, starts_at, ends_at) -> list[int]:
    """Nodes with room, fullest first: packing keeps whole nodes free for whole-node bookings.

    Counted in the database (one grouped query), so the cost does not grow with fleet size
    on the Python side.
    """
    return list(
        free_gpus(gpu_model=gpu_model, starts_at=starts_at, ends_at=ends_at)
        .order_by()
        .values("node_id")
        .annotate(free=Count("id"))
        .filter(free__gte=gpu_count)
        .order_by("free", "node_id")
        .values_list("node_id", flat=True)
    )


def fits(*, gpu_model, gpu_count, starts_at, ends_at) -> bool:
    return bool(
        candidate_nodes(
            gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at
        )
    )


_EARLIEST_START = """
WITH candidate AS (
    SELECT %(not_before)s::timestamptz AS t
    UNION
    (SELECT DISTINCT ag.ends_at FROM rentals_allocationgpu ag
     JOIN catalog_gpu g ON g.id = ag.gpu_id JOIN catalog_node n ON n.id = g.node_id
     WHERE n.gpu_model_id = %(model)s AND NOT ag.released AND ag.ends_at > %(not_before)s
     ORDER BY ag.ends_at LIMIT %(limit)s)
)
SELECT c.t
FROM candidate c
JOIN catalog_node n ON n.gpu_model_id = %(model)s AND n.state = %(active)s
JOIN catalog_gpu g ON g.node_id = n.id
WHERE NOT EXISTS (
    SELECT 1 FROM rentals_allocationgpu ag
    WHERE ag.gpu_id = g.id AND NOT ag.released
      AND ag.starts_at < c.t + %(duration)s AND ag.ends_at > c.t
)
GROUP BY c.t, n.id
HAVING count(*) >= %(count)s
ORDER BY c.t
LIMIT 1
"""


def earliest_start(
    *, gpu_model: GpuModel, gpu_count: int, duration: timedelta, not_before: datetime
) -> datetime | None:
    """The first instant ≥ not_before at which the request fits, or None if none is in sight.

    Capacity only frees up when a holding ends, so those instants (the next
    MAX_START_CANDIDATES of them) are the only candidates; one query tries them all.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            _EARLIEST_START,
            {
                "not_before": not_before,
                "model": gpu_model.pk,
                "limit": MAX_START_CANDIDATES,
                "active": NodeState.ACTIVE,
                "duration": duration,
                "count": gpu_count,
            },
        )
        row = cursor.fetchone()
    return row[0] if row else None
