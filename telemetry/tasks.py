"""Celery tasks of the telemetry pipeline. Schedules: anchorgpu/schedule.py."""

from datetime import datetime

from celery import shared_task
from django.conf import settings

from catalog.models import Node, NodeState
from core.db import db_now
from core.publish import publish_once
from telemetry.agents import agents_flag_silent
from telemetry.partitions import month_partitions_ensure, sample_partitions_ensure
from telemetry.poll import fleet_size_record, nodes_mark_stale, poll_nodes
from telemetry.remote import engine_unreachable, remote_poll_nodes, telemetry_ingest
from telemetry.rollup import fleet_rollups_refresh, rollup_start, shard_rollup, telemetry_prune


def _remote() -> bool:
    """TELEMETRY_SOURCE=prometheus: the operator's engine scrapes, we read it."""
    return settings.ANCHORGPU["TELEMETRY_SOURCE"] == "prometheus"


def _shards(task, *, expires) -> int:
    """Fan the active fleet out into shards of POLL_SHARD_SIZE node ids for `task`."""
    ids = list(
        Node.objects.filter(state=NodeState.ACTIVE).order_by("pk").values_list("pk", flat=True)
    )
    size = settings.ANCHORGPU["POLL_SHARD_SIZE"]
    for start in range(0, len(ids), size):
        task.apply_async(args=[ids[start : start + size]], expires=expires)
    return len(ids)


@shared_task
def nodes_poll_task():
    """Fan the active fleet out into shards; each shard is polled by whichever worker takes
    it (or, with the operator's engine as the source, judged from what the engine scraped)."""
    remote = _remote()
    shard_task = nodes_remote_poll_shard_task if remote else nodes_poll_shard_task
    count = _shards(shard_task, expires=settings.ANCHORGPU["POLL_INTERVAL"])
    if not (remote and engine_unreachable()):  # an engine outage is no node's staleness
        nodes_mark_stale()
    agents_flag_silent()
    fleet_size_record()
    return count


@shared_task
def nodes_poll_shard_task(node_ids):
    return poll_nodes(node_ids)


@shared_task
def nodes_remote_poll_shard_task(node_ids):
    return remote_poll_nodes(node_ids)


@shared_task
def telemetry_ingest_task():
    """Every minute: each shard's closed minutes from the operator's engine."""
    if not _remote():
        return 0
    return _shards(telemetry_ingest_shard_task, expires=60)


@shared_task
def telemetry_ingest_shard_task(node_ids):
    result = telemetry_ingest(node_ids)
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in result.items()}


@shared_task
def telemetry_rollup_task():
    """Every minute: the run's start here, then each shard's pass as a task of its own (the
    rollup queue), so the passes spread over the rollup workers' processes. A pass left
    waiting past the next run's start expires: that run reads the shard from its mark."""
    return rollup_fan_out(now=db_now())


def rollup_fan_out(*, now: datetime) -> int:
    """A run at `now` started here and its passes queued (also the catch-up benchmark's)."""
    shards, default = rollup_start()
    marks = [at.isoformat() if at else None for at in default]
    for shard in shards:
        telemetry_rollup_shard_task.apply_async(args=[shard, now.isoformat(), marks], expires=60)
    return len(shards)


@shared_task
def telemetry_rollup_shard_task(shard, now_iso, default):
    """One shard's pass of the run started at `now_iso`, then a refresh of the sums after
    the shards (it takes the hours this pass wrote, whichever refresh runs first). A pass
    capped short of the run's minute (a backlog after an outage) queues the shard's next
    pass of the same run at once, so a catch-up takes a pass per step, not a minute: a
    second pass of the shard running meanwhile (beat's next run) holds the lock, and the
    one that finds it held, or the shard's mark past its minute, does nothing and queues
    nothing."""
    minutes, hours = (datetime.fromisoformat(at) if at else None for at in default)
    done = shard_rollup(shard=shard, now=datetime.fromisoformat(now_iso), default=(minutes, hours))
    if done is not None and done["capped"]:
        telemetry_rollup_shard_task.apply_async(args=[shard, now_iso, default], expires=60)
    fleet_rollups_refresh_queue()
    return None if done is None else {k: v for k, v in done.items() if k != "first_hour"}


# The passes of a run finish within moments of each other: they queue one refresh between
# them, not one each (a fleet of 400 shards queued 400, each waiting on the lock to find
# nothing left). The refresh runs once the second is over, after every pass that found it
# queued has committed, so it takes their notes.
REFRESH_DEBOUNCE_SECONDS = 1


def fleet_rollups_refresh_queue() -> bool:
    """Queue a refresh of the sums after the shards unless one is queued and has not
    started; whether this call queued it."""
    return publish_once(
        "telemetry.tasks.fleet_rollups_refresh_task", within=REFRESH_DEBOUNCE_SECONDS
    )


@shared_task
def fleet_rollups_refresh_task():
    return fleet_rollups_refresh()


@shared_task
def telemetry_prune_task():
    return telemetry_prune()


@shared_task
def sample_partitions_ensure_task():
    """The raw samples' day partitions and the GPU hours' and days' month partitions, ahead."""
    return {"days": sample_partitions_ensure(), "months": month_partitions_ensure()}
