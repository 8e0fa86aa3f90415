"""The partial first and last hour of each GPU holding (`HoldingEdge`), kept when that hour
closes: GPU hours hold whole hours only, and once raw samples are pruned nothing else can
split an hour, so a past rental's figures would otherwise lose (or guess) its edges."""

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, FloatField, Max, Q, Sum
from django.utils import timezone

from rentals.models import AllocationGpu, HoldingEdge
from rentals.models.edges import holding_edges, hour_ceil
from telemetry.models import GpuRollup, RollupBucket
from telemetry.rollup import bucket_floor
from telemetry.selectors import gpu_totals_by_gpu, raw_samples_from, rolled_until

MINUTE = timedelta(minutes=1)
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
def holding_edges_close(
    *, lookback: timedelta = EDGES_LOOKBACK, now: datetime | None = None
) -> int:
    """Write the edges of holdings whose edge hour every shard of the rollup has closed (in
    the last `lookback`), from the raw samples, once; an edge whose raw samples are no longer
    all kept is left unwritten (a reader then says it cannot split that hour). Returns the
    rows written. Idempotent: an edge already kept is not written again."""
    closed = rolled_until("hour")
    if closed is None:
        return 0
    since = max(closed - lookback, raw_samples_from(now=now or timezone.now()))
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


def _minute_sums(
    *, gpu_ids: list[int], start: datetime, end: datetime
) -> dict[int, dict[str, Any]]:
    """Per GPU, the former per-GPU minute rollups' sums over the whole minutes of
    [start, end): what the figures read from them before (the seconds on either side were
    only in raw samples, long pruned)."""
    first = (
        start if start.second == start.microsecond == 0 else bucket_floor(start, "minute") + MINUTE
    )
    rows = (
        GpuRollup.objects.filter(
            bucket=RollupBucket.MINUTE, gpu_id__in=gpu_ids, at__gte=first,
            at__lt=bucket_floor(end, "minute"),
        )
        .values("gpu_id")
        .annotate(  # named apart from the fields they sum (an annotation shadows a field)
            s_samples=Sum("samples"),
            s_util_sum=Sum(F("utilization_avg") * F("samples"), output_field=FloatField()),
            s_util_samples=Sum("samples", filter=Q(utilization_avg__isnull=False)),
            s_util_max=Max("utilization_max"), s_mem_max_mib=Max("memory_used_max_mib"),
            s_energy_j=Sum("energy_j"), s_covered_s=Sum("covered_s"), s_busy_s=Sum("busy_s"),
        )
    )  # fmt: skip
    return {
        row.pop("gpu_id"): {name.removeprefix("s_"): value for name, value in row.items()}
        for row in rows
    }


def holding_edges_from_minutes(
    *, batch: int = 1000, log: Callable[[str], object] = lambda line: None
) -> dict[str, int]:
    """Convert the former per-GPU minute rollups: every holding's edge that is not kept
    yet, from raw samples where they still reach back (`holding_edges_close` over the raw
    retention), else from the minute rows (as exact as the figures were while those were
    read). Resumable: a kept edge is never written again, so a run that stops is run again.
    Returns the edges written from each source."""
    now = timezone.now()
    counts = {
        "from_raw": holding_edges_close(lookback=settings.ANCHORGPU["RAW_RETENTION"], now=now)
    }
    raw_from = raw_samples_from(now=now)
    counts["from_minutes"] = 0
    after = 0
    while True:
        holdings = list(
            AllocationGpu.objects.filter(allocation__isnull=False, released=False, pk__gt=after)
            .order_by("pk")
            .only("pk", "gpu_id", "starts_at", "ends_at")[:batch]
        )
        if not holdings:
            return counts
        after = holdings[-1].pk
        kept = set(
            HoldingEdge.objects.filter(holding__in=holdings).values_list(
                "holding_id", "start", "end"
            )
        )
        owed: dict[tuple[datetime, datetime], list[AllocationGpu]] = {}
        for holding in holdings:
            for start, end in holding_edges(holding.starts_at, holding.ends_at):
                if start < raw_from and (holding.pk, start, end) not in kept:
                    owed.setdefault((start, end), []).append(holding)
        rows = []
        for (start, end), owners in owed.items():
            sums = _minute_sums(gpu_ids=[h.gpu_id for h in owners], start=start, end=end)
            for holding in owners:
                one = sums.get(holding.gpu_id)
                if one is None:
                    continue  # no minute of it: nothing to convert (nor was there then)
                rows.append(
                    HoldingEdge(
                        holding=holding, start=start, end=end, samples=one["samples"],
                        util_sum=one["util_sum"] or 0.0, util_samples=one["util_samples"] or 0,
                        util_max=one["util_max"], mem_max_mib=one["mem_max_mib"],
                        energy_j=one["energy_j"], covered_s=one["covered_s"] or 0.0,
                        busy_s=one["busy_s"] or 0.0,
                    )
                )  # fmt: skip
        HoldingEdge.objects.bulk_create(rows, ignore_conflicts=True)
        counts["from_minutes"] += len(rows)
        log(f"holdings up to {after}: {len(rows)} edges from minute rows")
