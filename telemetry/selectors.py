"""Reads of telemetry: series of GPUs over a time range, at the resolution the range needs."""

from datetime import datetime, timedelta

from catalog.models import Gpu
from telemetry.models import GpuRollup, GpuSample

RAW_MAX_SPAN = timedelta(hours=6)
MINUTE_MAX_SPAN = timedelta(days=7)


def gpu_series(*, gpus: list[Gpu], start: datetime, end: datetime) -> dict:
    """Per-GPU series for the charts: raw samples for short ranges, rollups for long ones."""
    gpus = {gpu.pk: gpu for gpu in gpus}
    span = end - start
    series = {gpu_id: [] for gpu_id in gpus}
    if span <= RAW_MAX_SPAN:
        source = "raw"
        rows = (
            GpuSample.objects.filter(gpu_id__in=gpus, at__gte=start, at__lte=end)
            .order_by("at")
            .values_list(
                "gpu_id", "at", "utilization", "memory_used_mib", "memory_total_mib",
                "power_w", "temperature_c",
            )
        )  # fmt: skip
    else:
        bucket = GpuRollup.Bucket.MINUTE if span <= MINUTE_MAX_SPAN else GpuRollup.Bucket.HOUR
        source = bucket
        rows = (
            GpuRollup.objects.filter(gpu_id__in=gpus, bucket=bucket, at__gte=start, at__lte=end)
            .order_by("at")
            .values_list(
                "gpu_id", "at", "utilization_avg", "memory_used_max_mib", "memory_total_mib",
                "power_avg_w", "temperature_max_c",
            )
        )  # fmt: skip
    for gpu_id, at, util, mem, mem_total, power, temp in rows:
        series[gpu_id].append(
            {"t": at.isoformat(), "util": util, "mem": mem, "mem_total": mem_total,
             "power": power, "temp": temp}
        )  # fmt: skip
    return {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "source": source,
        "gpus": [
            {"uuid": gpus[g].uuid, "index": gpus[g].index, "points": series[g]}
            for g in sorted(gpus, key=lambda g: gpus[g].index)
        ],
    }
