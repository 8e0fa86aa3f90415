"""Raw samples for rollup tests on GPUs in several shards, and every row a rollup run
writes, so runs made in different ways (fanned out, capped) compare with the serial one."""

from datetime import timedelta
from typing import NamedTuple

from django.db import connection

from catalog.models import Gpu
from telemetry import sql
from telemetry.models import FleetRollup, GpuBusy, GpuDay, GpuHour, HoursWritten, RollupMark

HOUR = timedelta(hours=1)

# A sample every 2 minutes on every GPU from `t0` for `hours`, utilisation varying by GPU
# and time, an energy counter that rises (and, on one GPU, resets once).
SAMPLES = """
INSERT INTO telemetry_gpusample (gpu_id, at, utilization, memory_used_mib, memory_total_mib,
    power_w, temperature_c, energy_j)
SELECT g.id, t, (g.id * 37 + extract(epoch FROM t)::bigint / 120 * 13) %% 101, 1000, 80000, 300,
       50, CASE WHEN g.id = %(reset_gpu)s AND t >= %(reset_at)s
                THEN extract(epoch FROM t - %(reset_at)s) * 100
                ELSE extract(epoch FROM t - %(t0)s) * 300 END
FROM catalog_gpu g
CROSS JOIN generate_series(%(t0)s::timestamptz,
    %(t0)s::timestamptz + %(hours)s * interval '1 hour' - interval '1 second',
    interval '2 minutes') AS t
"""


def samples_write(t0, hours, *, reset_after=5 * HOUR):
    """Every GPU's samples for `hours` from `t0`; the first GPU's counter resets at
    `t0 + reset_after`."""
    first = Gpu.objects.order_by("pk").first()
    with connection.cursor() as cursor:
        cursor.execute(
            SAMPLES, {"t0": t0, "hours": hours, "reset_gpu": first.pk, "reset_at": t0 + reset_after}
        )


class Shards(NamedTuple):
    ids: list[int]
    size: int

    def of(self, gpu) -> int:
        return gpu.pk // self.size


def shards_of_a_third(settings) -> Shards:
    """At least three shards of GPU ids: a shard size of a third of the fleet."""
    ids = list(Gpu.objects.order_by("pk").values_list("pk", flat=True))
    size = max(1, len(ids) // 3)
    settings.ANCHORGPU = {**settings.ANCHORGPU, "ROLLUP_SHARD_SIZE": size}
    found = Shards(sorted({pk // size for pk in ids}), size)
    assert len(found.ids) >= 3
    return found


def rollup_rows():
    """Everything a run writes, in a fixed order."""
    figures = ("gpu_id", "at", *sql.FIGURES)
    fleet = ("bucket", "at", "gpu_model_id", "region_id", "shard", "gpus", "busy_gpus",
             "samples", "util_sum", "util_samples", "covered_s", "busy_s", "energy_j")  # fmt: skip
    return {
        "gpu_hours": list(GpuHour.objects.order_by("gpu_id", "at").values_list(*figures)),
        "gpu_days": list(GpuDay.objects.order_by("gpu_id", "at").values_list(*figures)),
        "fleet": list(FleetRollup.objects.order_by(*fleet[:5]).values_list(*fleet)),
        "busy": list(GpuBusy.objects.order_by("gpu_id").values_list("gpu_id", "at")),
        "marks": list(RollupMark.objects.order_by("shard").values_list()),
    }


def rollups_undo():
    """Every row a run wrote deleted: the raw samples are left to roll up again."""
    for model in (GpuHour, GpuDay, FleetRollup, GpuBusy, RollupMark, HoursWritten):
        model.objects.all().delete()
