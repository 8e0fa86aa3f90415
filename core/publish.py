"""Queueing a task after a commit, for what a sweep would queue anyway if this fails.

Notices and webhook deliveries are rows first (written in the change's transaction), and
a beat sweep sends whatever is still owed. So publishing them is best effort: with Redis
away (core.cache's breaker open, or the publish failing) the request goes on at once and
the sweep sends them later; nothing is lost and nobody waits for a broker.
"""

import logging
from collections.abc import Sequence

from celery import current_app
from django.core.cache import cache
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

from core.cache import breaker

logger = logging.getLogger(__name__)


def once_key(task_name: str, *args: int | str) -> str:
    """The mark `publish_once` holds for `task_name(*args)` (a glob pattern given "*")."""
    return ":".join(["publish-once", task_name, *map(str, args)])


def publish_once(task_name: str, *args: int | str, within: float = 1.0) -> bool:
    """Queue `task_name(*args)` to run `within` seconds from now, unless one with the same
    arguments is already queued from the last `within` seconds (a Redis key of that
    lifetime, across every process): a sweep that catches up on all there is, so many
    commits make one run, and the run, due when the key expires, comes after every commit
    whose call found the key. Whether it was queued; with Redis away it is not, and the beat
    schedule runs the sweep anyway."""
    if not cache.add(once_key(task_name, *args), 1, timeout=within):
        return False
    if not breaker.allows():
        return False
    try:
        current_app.send_task(task_name, args=list(args), countdown=within)
    except (RedisError, OSError, BrokerError) as exc:
        breaker.failure(exc)
        logger.warning("%s: left for the beat schedule (broker unavailable)", task_name)
        return False
    return True


def publish(task_name: str, ids: Sequence[object]) -> int:
    """Queue `task_name(id)` for each id; how many were queued."""
    queued = 0
    for pk in ids:
        if not breaker.allows():
            break
        try:
            current_app.send_task(task_name, args=[pk])
        except (RedisError, OSError, BrokerError) as exc:
            breaker.failure(exc)
            break
        queued += 1
    if queued < len(ids):
        logger.warning("%s: %d of %d left for the sweep (broker unavailable)", task_name,
                       len(ids) - queued, len(ids))  # fmt: skip
    return queued
