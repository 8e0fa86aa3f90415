"""What a GPU did in the partial first and last hour of a holding, kept when that hour
closes: GPU hours cover whole hours only, and once the raw samples are pruned nothing else
can split an hour, so a past rental's figures stay exact from these."""

from datetime import datetime, timedelta

from django.db import models
from django.db.models import F, Q

from rentals.models.allocations import AllocationGpu
from telemetry.rollup import bucket_floor


class HoldingEdge(models.Model):
    """One holding's share of one hour it held only in part: [start, end) inside that hour,
    with the sums `telemetry.selectors.Totals` adds (written by `holding_edges_close`). A
    boundary that moves later (a stop, a swap) gets a row of its own; readers take only the
    row whose range is the holding's current edge."""

    holding = models.ForeignKey(AllocationGpu, on_delete=models.CASCADE, related_name="edges")
    start = models.DateTimeField()
    end = models.DateTimeField()
    samples = models.IntegerField()
    util_sum = models.FloatField()
    util_samples = models.IntegerField()
    util_max = models.FloatField(null=True)
    mem_max_mib = models.FloatField(null=True)
    energy_j = models.FloatField(null=True)
    covered_s = models.FloatField()
    busy_s = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["holding", "start", "end"], name="rentals_holdingedge_once"
            ),
            models.CheckConstraint(
                condition=Q(start__lt=F("end")), name="rentals_holdingedge_not_empty"
            ),
        ]

    def __str__(self):
        return f"{self.holding_id} [{self.start}, {self.end})"


HOUR = timedelta(hours=1)


def hour_floor(at: datetime) -> datetime:
    return bucket_floor(at, "hour")


def hour_ceil(at: datetime) -> datetime:
    floor = hour_floor(at)
    return floor if floor == at else floor + HOUR


def holding_edges(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """The parts of [start, end) that are not whole hours: the partial first hour and the
    partial last one (one part where both fall in the same hour; none on whole hours)."""
    edges = []
    if hour_floor(start) != start:
        edges.append((start, min(hour_ceil(start), end)))
    if hour_floor(end) != end:
        last = (max(hour_floor(end), start), end)
        if not edges or edges[0] != last:
            edges.append(last)
    return edges
