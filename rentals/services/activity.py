"""Activity against the paid state: a GPU busy while its allocation is stopped, or busy with
no allocation at all. Telemetry stores what the GPUs did; only this layer knows what they
were rented for, so it judges these two flags from the newest samples."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from core.db import db_now
from rentals.models import AllocationState
from rentals.selectors.holdings import holdings_at
from telemetry.flags import FlagKey, flags_sync
from telemetry.models import ACTIVITY_FLAGS, FlagKind, GpuSample


@transaction.atomic
def gpu_activity_flags_update(*, now: datetime | None = None) -> int:
    """Open or close the activity flags of every GPU polled in the last two intervals."""
    now = now or db_now()
    conf = settings.ANCHORGPU
    since = now - timedelta(seconds=2 * conf["POLL_INTERVAL"])
    newest = {
        gpu_id: (node_id, utilization)
        for gpu_id, node_id, utilization in GpuSample.objects.filter(at__gte=since, at__lte=now)
        .order_by("gpu_id", "-at")
        .distinct("gpu_id")
        .values_list("gpu_id", "gpu__node_id", "utilization")
    }
    if not newest:
        return 0
    held = dict(
        holdings_at(now)
        .filter(
            gpu_id__any=newest,
            allocation__state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
        )
        .values_list("gpu_id", "allocation__state")
    )
    holding: dict[FlagKey, str] = {}
    for gpu_id, (node_id, utilization) in newest.items():
        if utilization is None or utilization <= conf["ACTIVE_UTILISATION_PCT"]:
            continue
        state = held.get(gpu_id)
        if state == AllocationState.STOPPED:
            holding[(node_id, gpu_id, FlagKind.STOPPED_BUT_ACTIVE)] = f"{utilization:.0f} %"
        elif state is None:
            holding[(node_id, gpu_id, FlagKind.UNALLOCATED_ACTIVE)] = f"{utilization:.0f} %"
    flags_sync(holding, decided=Q(gpu_id__any=newest), now=now, kinds=ACTIVITY_FLAGS)
    return len(holding)
