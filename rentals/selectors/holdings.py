"""Reads of holdings: which GPUs live allocations and maintenance windows hold, in a window
or at an instant (the ORM's side of rentals.sql.holdings), and the maintenance windows."""

from datetime import datetime, timedelta

from django.db.models import (
    Prefetch,
    QuerySet,
)

from rentals.models import (
    Allocation,
    AllocationGpu,
    AllocationState,
    MaintenanceWindow,
)

# Timestamps have a resolution of a microsecond, in PostgreSQL as in Python: an instant is
# the window of one microsecond.
INSTANT = timedelta(microseconds=1)


def holdings_overlapping(*, starts_at: datetime, ends_at: datetime) -> QuerySet[AllocationGpu]:
    """The live (unreleased) holdings that overlap [starts_at, ends_at): a GPU is free for
    the window when none of them holds it. The same rule as the SQL clause
    `rentals.sql.holdings.gpu_free` (and `gpu_held`), which placement and availability use; the
    exclusion constraint `rentals_allocationgpu_no_overlap` guards it."""
    return AllocationGpu.objects.filter(
        released=False, starts_at__lt=ends_at, ends_at__gt=starts_at
    )


def maintenance_list() -> QuerySet[MaintenanceWindow]:
    """Maintenance windows, the latest first, with the GPUs each holds (staff)."""
    return MaintenanceWindow.objects.select_related("created_by").prefetch_related(
        Prefetch(
            "held",
            queryset=AllocationGpu.objects.select_related("gpu__node").order_by(
                "gpu__node__hostname", "gpu__index"
            ),
        )
    )


def maintenance_get(*, pk: int) -> MaintenanceWindow | None:
    return maintenance_list().filter(pk=pk).first()


def node_neighbours(*, allocation: Allocation, at: datetime) -> int:
    """How many of the allocation's node's GPUs other teams' allocations hold at `at`: the
    node is shared with other customers when this is not 0."""
    return (
        AllocationGpu.objects.filter(
            node_id=allocation.node_id, released=False, starts_at__lte=at, ends_at__gt=at,
            allocation__isnull=False,
        )
        .exclude(allocation__team_id=allocation.team_id)
        .count()
    )  # fmt: skip


def holdings_at(at: datetime) -> QuerySet[AllocationGpu]:
    """The live holdings at the instant `at` (starts_at ≤ at < ends_at): those overlapping
    the window of that one instant."""
    return holdings_overlapping(starts_at=at, ends_at=at + INSTANT)


def gpu_states_at(at: datetime) -> dict[int, str]:
    """{gpu id: "running" | "stopped"} for GPUs held by a live allocation at `at`."""
    return dict(
        holdings_at(at)
        .filter(allocation__state__in=[AllocationState.RUNNING, AllocationState.STOPPED])
        .values_list("gpu_id", "allocation__state")
    )
