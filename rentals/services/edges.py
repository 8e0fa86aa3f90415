"""The partial first and last hour of each GPU holding (`HoldingEdge`), kept when that hour
closes: GPU hours hold whole hours only, and once raw samples are pruned nothing else can
split an hour, so a past rental's figures would otherwise lose (or guess) its edges."""

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q

from rentals.models import AllocationGpu, HoldingEdge
from rentals.models.edges import holding_edges, hour_ceil
from telemetry.selectors import gpu_totals_by_gpu, oldest_sample_at, rolled_until

# How far back a run looks for edges whose hour closed: beat runs it every minute, so a day
# covers an outage of the workers up to a day (and raw samples are kept longer than that).
EDGES_LOOKBACK = timedelta(days=1)


def _candidates(*, since: datetime, closed: datetime) -> Iterable[AllocationGpu]:
    """Allocations' holdings with a boundary in [since, closed), read by the live holdings'
    index on `ends_at` (a holding ending before `since` has no boundary in the range)."""
    return (
        AllocationGpu.objects.filter(allocation__isnull=False, released=False, ends_at__gt=since)
        .filter(Q(starts_at__gte=since, starts_at__lt=closed) | Q(ends_at__lt=closed))
        .only("pk", "gpu_id", "starts_at", "ends_at")
    )


@transaction.atomic
def holding_edges_close(*, lookback: timedelta = EDGES_LOOKBACK) -> int:
    """Write the edges of holdings whose edge hour every shard of the rollup has closed (in
    the last `lookback`), from the raw samples, once; an edge whose raw samples are no longer
    all kept is left unwritten (a reader then says it cannot split that hour). Returns the
    rows written. Idempotent: an edge already kept is not written again."""
    closed = rolled_until("hour")
    oldest = oldest_sample_at()
    if closed is None or oldest is None:
        return 0
    since = max(closed - lookback, oldest)
    owed: dict[tuple[datetime, datetime], list[AllocationGpu]] = {}
    holdings = list(_candidates(since=since, closed=closed))
    kept = set(
        HoldingEdge.objects.filter(holding__in=holdings).values_list("holding_id", "start", "end")
    )
    for holding in holdings:
        for start, end in holding_edges(holding.starts_at, holding.ends_at):
            if (
                since <= start
                and hour_ceil(start) <= closed
                and (holding.pk, start, end) not in kept
            ):
                owed.setdefault((start, end), []).append(holding)
    rows = []
    for (start, end), owners in owed.items():
        totals = gpu_totals_by_gpu(start=start, end=end, gpu_ids=[h.gpu_id for h in owners])
        for holding in owners:
            one = totals.get(holding.gpu_id)
            rows.append(
                HoldingEdge(
                    holding=holding, start=start, end=end,
                    samples=one.samples if one else 0,
                    util_sum=one.util_sum if one else 0.0,
                    util_samples=one.util_samples if one else 0,
                    util_max=one.util_max if one else None,
                    mem_max_mib=one.memory_max_mib if one else None,
                    energy_j=one.energy_j if one else None,
                    covered_s=one.covered_s if one else 0.0,
                    busy_s=one.busy_s if one else 0.0,
                )
            )  # fmt: skip
    HoldingEdge.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
