"""Celery tasks of the telemetry pipeline. Schedules: anchorgpu/schedule.py."""

from celery import shared_task
from django.conf import settings

from catalog.models import Node, NodeState
from telemetry.agents import agents_flag_silent
from telemetry.partitions import sample_partitions_ensure
from telemetry.poll import fleet_size_record, nodes_mark_stale, poll_nodes
from telemetry.rollup import telemetry_prune, telemetry_rollup


@shared_task
def nodes_poll_task():
    """Fan the active fleet out into shards; each shard is polled by whichever worker takes it."""
    conf = settings.ANCHORGPU
    ids = list(
        Node.objects.filter(state=NodeState.ACTIVE).order_by("pk").values_list("pk", flat=True)
    )
    size = conf["POLL_SHARD_SIZE"]
    for start in range(0, len(ids), size):
        nodes_poll_shard_task.apply_async(
            args=[ids[start : start + size]], expires=conf["POLL_INTERVAL"]
        )
    nodes_mark_stale()
    agents_flag_silent()
    fleet_size_record()
    return len(ids)


@shared_task
def nodes_poll_shard_task(node_ids):
    return poll_nodes(node_ids)


@shared_task
def telemetry_rollup_task():
    return telemetry_rollup()


@shared_task
def telemetry_prune_task():
    return telemetry_prune()


@shared_task
def sample_partitions_ensure_task():
    return sample_partitions_ensure()
