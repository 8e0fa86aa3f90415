"""Flags: a condition on a node or a GPU, opened when it holds and closed when it clears.

The reading flags (an unreachable node, a missing or hot GPU, an XID, AMD's uncorrectable
memory errors) are judged here from a
polling round's readings; other judges (the rentals layer's activity flags, silent node
agents) open and close theirs with `flags_sync`.
"""

from datetime import timedelta

from django.conf import settings
from django.db.models import Q

from telemetry.models import READING_FLAGS, SEVERITY, Flag, FlagKind, GpuSample


def reading_flags_update(gpus_by_node, readings_by_gpu, now):
    """Open a flag when its condition holds, close it when a good poll shows it cleared.

    A node that cannot be polled opens one node flag, not one per GPU, and says nothing of
    its GPUs. An XID opens a flag when the exporter's last-XID value changes to a non-zero
    code (the gauge is sticky: it keeps the last code until the exporter restarts). Activity
    against the allocations' states is the rentals layer's to judge (rentals/services/activity.py).
    """
    conf = settings.ANCHORGPU
    reachable = set()
    holding: dict[tuple[int, int | None, str], str] = {}
    xids: dict[int, tuple[int, int]] = {}
    for node_id, gpus in gpus_by_node.items():
        if not any(g.pk in readings_by_gpu for g in gpus) and gpus:
            holding[(node_id, None, FlagKind.NODE_UNREACHABLE)] = "no answer with GPU readings"
            continue
        reachable.add(node_id)
        for gpu in gpus:
            reading = readings_by_gpu.get(gpu.pk)
            if reading is None:
                holding[(node_id, gpu.pk, FlagKind.GPU_MISSING)] = "not in the exporter's output"
                continue
            if reading.xid:
                xids[gpu.pk] = (node_id, reading.xid)
            if reading.ras_uncorrectable:
                holding[(node_id, gpu.pk, FlagKind.RAS)] = (
                    f"{reading.ras_uncorrectable:.0f} uncorrectable ECC errors"
                )
            if (
                reading.temperature_c is not None
                and reading.temperature_c > conf["HOT_TEMPERATURE_C"]
            ):
                holding[(node_id, gpu.pk, FlagKind.HOT)] = f"{reading.temperature_c:.0f} °C"
    decided = Q(kind=FlagKind.NODE_UNREACHABLE, node_id__any=gpus_by_node) | Q(
        kind__in=[FlagKind.HOT, FlagKind.GPU_MISSING, FlagKind.RAS], node_id__any=reachable
    )
    flags_sync(holding, decided=decided, now=now)
    _xid_events(xids, now)


def _xid_events(xids: dict[int, tuple[int, int]], now):
    """Open (or refresh) an XID flag where the last-XID value changed to a non-zero code,
    keeping the code (`Flag.code`: a reader tells a fatal XID by it); close XID flags quiet
    for XID_QUIET_MINUTES."""
    if xids:
        before = dict(
            GpuSample.objects.filter(gpu_id__any=xids, at__lt=now)
            .order_by("gpu_id", "-at")
            .distinct("gpu_id")
            .values_list("gpu_id", "xid")
        )
        for gpu_id, (node_id, xid) in xids.items():
            if before.get(gpu_id) == xid:
                continue  # the same sticky code as last time: nothing new happened
            detail = f"XID {xid}"
            refreshed = Flag.objects.filter(
                gpu_id=gpu_id, kind=FlagKind.XID, closed_at__isnull=True
            ).update(last_seen_at=now, detail=detail, code=xid)
            if not refreshed:
                Flag.objects.bulk_create(
                    [_flag(node_id, gpu_id, FlagKind.XID, detail, now, code=xid)]
                )
    quiet = timedelta(minutes=settings.ANCHORGPU["XID_QUIET_MINUTES"])
    Flag.objects.filter(
        kind=FlagKind.XID, closed_at__isnull=True, last_seen_at__lt=now - quiet
    ).update(closed_at=now)


def _flag(node_id, gpu_id, kind, detail, now, *, code=None) -> Flag:
    return Flag(
        node_id=node_id, gpu_id=gpu_id, kind=kind, severity=SEVERITY[kind], detail=detail[:200],
        code=code, opened_at=now, last_seen_at=now,
    )  # fmt: skip


# What holds: (node, GPU, kind); the node is None for a flag of the engine's own.
FlagKey = tuple[int | None, int | None, str]


def flags_sync(holding: dict[FlagKey, str], *, decided: Q, now, kinds=READING_FLAGS):
    """Open the flags in `holding` ((node, GPU or None, kind) → detail; once: a partial
    unique index) and mark the open ones seen; close the open flags of `kinds` that this
    round `decided` about and that no longer hold."""
    Flag.objects.bulk_create(
        [_flag(n, g, k, d, now) for (n, g, k), d in holding.items()], ignore_conflicts=True
    )
    still, cleared = [], []
    for flag in (
        Flag.objects.filter(closed_at__isnull=True, kind__in=kinds)
        .filter(decided)
        .only("id", "node_id", "gpu_id", "kind", "opened_at")
    ):
        held = (flag.node_id, flag.gpu_id, flag.kind) in holding
        if held and flag.opened_at != now:
            still.append(flag.pk)
        elif not held:
            cleared.append(flag.pk)
    if still:
        Flag.objects.filter(pk__any=still).update(last_seen_at=now)
    if cleared:
        Flag.objects.filter(pk__any=cleared).update(closed_at=now)
