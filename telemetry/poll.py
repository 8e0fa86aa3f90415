"""Poll nodes' exporters concurrently, store samples, update node health and flags
(telemetry.flags judges the readings).

One shard of nodes is fetched at once with asyncio (bounded concurrency, connect and read
timeouts, a body-size cap), so a slow or dead node costs only its own timeout. Storing is
one binary COPY per shard.
"""

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

import httpx
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Min, Q

from catalog.models import Gpu, Node, NodeHealth, NodeState
from catalog.software import version_or_none
from core.db import db_now
from telemetry import sql
from telemetry.flags import reading_flags_update
from telemetry.models import FleetSize, PollOutcome, RollupBucket
from telemetry.parse import Reading, Scrape, ScrapeError, parse_exporter

MAX_CONCURRENCY = 200

logger = logging.getLogger(__name__)


class BodyRefused(Exception):
    """Too large, or compressed."""


@dataclass
class Fetched:
    node_id: int
    started: float
    duration_ms: int
    body: str | None = None
    error: str | None = None


async def _read_capped(client, url, max_bytes) -> str:
    """The body as sent, counted in bytes on the wire: a compressed body could expand far
    past the cap, so none is accepted (we ask for identity)."""
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise httpx.HTTPStatusError(
                f"HTTP {response.status_code}", request=response.request, response=response
            )
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise BodyRefused(f"compressed body ({encoding}) refused")
        chunks, size = [], 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > max_bytes:
                raise BodyRefused(f"body larger than {max_bytes} bytes")
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


async def _fetch_one(client, node_id, url, conf, semaphore) -> Fetched:
    async with semaphore:
        started = time.monotonic()
        try:
            body = await asyncio.wait_for(
                _read_capped(client, url, conf["POLL_MAX_BYTES"]), conf["POLL_NODE_DEADLINE"]
            )
            return Fetched(node_id, started, int((time.monotonic() - started) * 1000), body=body)
        except TimeoutError:
            message = f"no complete answer within {conf['POLL_NODE_DEADLINE']:g} s"
        except (httpx.HTTPError, BodyRefused, OSError) as exc:
            message = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        return Fetched(node_id, started, int((time.monotonic() - started) * 1000), error=message)


async def fetch_all(targets: list[tuple[int, str]], *, conf=None) -> list[Fetched]:
    conf = conf or settings.ANCHORGPU
    timeout = httpx.Timeout(
        connect=conf["POLL_CONNECT_TIMEOUT"],
        read=conf["POLL_READ_TIMEOUT"],
        write=conf["POLL_READ_TIMEOUT"],
        pool=None,
    )
    semaphore = asyncio.Semaphore(MAX_CONCURRENCY)
    limits = httpx.Limits(
        max_connections=MAX_CONCURRENCY, max_keepalive_connections=MAX_CONCURRENCY
    )
    headers = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "identity"}
    async with httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers) as client:
        tasks = {
            asyncio.ensure_future(_fetch_one(client, nid, url, conf, semaphore)): nid
            for nid, url in targets
        }
        started = time.monotonic()
        done, pending = await asyncio.wait(tasks, timeout=conf["POLL_SHARD_DEADLINE"])
        for task in pending:  # the shard's deadline keeps the task under Celery's time limit
            task.cancel()
        late = int((time.monotonic() - started) * 1000)
        return [
            task.result()
            if task in done
            else Fetched(tasks[task], started, late, error="the shard's poll deadline passed")
            for task in tasks
        ]


def run_async(coroutine):
    """asyncio.run, also from a thread that already runs a loop (ASGI, a browser driver)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class PolledGpu(NamedTuple):
    """What polling needs of a GPU (tuples: a shard loads thousands)."""

    pk: int
    node_id: int
    index: int  # type: ignore[assignment]  # the GPU's index; hides tuple.index, unused here
    uuid: str


def reading_for(scrape: Scrape, gpu: Gpu | PolledGpu):
    """By UUID / serial; an AMD exporter without serials keys its GPUs by gpu_id (index)."""
    return scrape.readings.get(gpu.uuid) or scrape.readings.get(f"gpu_id:{gpu.index}")


def _outcome(node, gpus, fetched: Fetched) -> tuple[str, str, Scrape | None]:
    if fetched.error:
        return PollOutcome.UNREACHABLE, fetched.error, None
    try:
        assert fetched.body is not None, "a fetch without an error has a body"
        scrape = parse_exporter(fetched.body, exporter=node.exporter, prefix=node.metric_prefix)
    except ScrapeError as exc:
        return PollOutcome.MALFORMED, str(exc), None
    except Exception:  # whatever an exporter sends, it is that node's fault only
        logger.exception("parsing node %s", node.pk)
        return PollOutcome.MALFORMED, "the exporter's answer could not be read", None
    return scrape_outcome(gpus, scrape)


def scrape_outcome(gpus, scrape: Scrape) -> tuple[str, str, Scrape]:
    """What a scrape that was read says of its node: no GPU families, GPUs missing, or ok
    (whichever source the scrape came from: a body we fetched, or an engine's samples)."""
    if scrape.gpu_families == 0:
        return PollOutcome.DEGRADED, "exporter answered without GPU families", scrape
    missing = [g for g in gpus if reading_for(scrape, g) is None]
    if missing:
        names = ", ".join(f"#{g.index} {g.uuid}" for g in missing)
        return PollOutcome.DEGRADED, f"missing GPUs (possibly fallen off the bus): {names}", scrape
    return PollOutcome.OK, "; ".join(scrape.problems[:5]), scrape


def poll_nodes(node_ids: list[int], *, now: datetime | None = None) -> dict:
    """Poll these nodes once and store what they said. Never raises for a node's fault."""
    nodes = {
        n.pk: n
        for n in Node.objects.filter(pk__any=node_ids, state=NodeState.ACTIVE).only(
            "id",
            "telemetry_url",
            "exporter",
            "metric_prefix",
            "last_good_poll_at",
            "last_poll_at",
            "polled_since",
        )
    }
    if not nodes:
        return {"nodes": 0, "samples": 0}
    gpus_by_node: dict[int, list[PolledGpu]] = {}
    for row in Gpu.objects.filter(node_id__any=nodes).values_list("id", "node_id", "index", "uuid"):
        gpus_by_node.setdefault(row[1], []).append(PolledGpu(*row))
    fetched = run_async(fetch_all([(n.pk, n.telemetry_url) for n in nodes.values()]))
    return store_polls(nodes, gpus_by_node, fetched, now=now or db_now())


@dataclass
class NodePoll:
    """What one node's poll stores."""

    poll: tuple  # a row of POLL_COLUMNS
    samples: list[tuple]  # rows of SAMPLE_COLUMNS
    readings: dict[int, Reading]
    health: tuple


def _node_poll(node, gpus, item: Fetched, *, now, stale_after) -> NodePoll:
    outcome, detail, scrape = _outcome(node, gpus, item)
    return node_poll_of(
        node, gpus, outcome, detail, scrape, item.duration_ms, now=now, stale_after=stale_after
    )


def scrape_samples(gpus, scrape: Scrape, at) -> tuple[dict[int, Reading], list[tuple]]:
    """The readings of the node's GPUs in a scrape (by UUID or serial), and their rows of
    SAMPLE_COLUMNS at `at`, for COPY (no model instances)."""
    readings, samples = {}, []
    for gpu in gpus:
        reading = reading_for(scrape, gpu)
        if reading is not None:
            readings[gpu.pk] = reading
            samples.append(
                (gpu.pk, at, reading.utilization, reading.memory_used_mib,
                 reading.memory_total_mib, reading.power_w, reading.temperature_c,
                 reading.energy_j, reading.xid)
            )  # fmt: skip
    return readings, samples


def node_poll_of(
    node, gpus, outcome, detail, scrape, duration_ms, *, now, stale_after, seen_at=None
) -> NodePoll:
    """A node's poll row, samples, readings and health from what its exporter said.
    `seen_at` is when the scrape was taken where that is not `now` (an engine's scrape):
    the samples and the last good poll carry it."""
    seen_at = seen_at or now
    readings, samples = scrape_samples(gpus, scrape, seen_at) if scrape else ({}, [])
    good = outcome in (PollOutcome.OK, PollOutcome.DEGRADED) and scrape and scrape.readings
    last_good = seen_at if good else node.last_good_poll_at
    if outcome == PollOutcome.OK:
        health = NodeHealth.HEALTHY
    elif outcome == PollOutcome.DEGRADED:
        health = NodeHealth.DEGRADED
    elif last_good is not None and now - max(last_good, polled_since(node, now)) >= stale_after:
        # Stale from the polls made since its run of polls began, not from a gap before it
        # (the console stopped or restarted: the node was not watched, not silent).
        health = NodeHealth.STALE
    else:
        health = NodeHealth(outcome)
    if health == NodeHealth.STALE:
        detail = f"no good poll since {last_good:%Y-%m-%d %H:%M:%S} UTC; last error: {detail}"
    poll = (  # a row of POLL_COLUMNS
        node.pk, now, min(duration_ms, 2**31 - 1), outcome, detail[:2000],
        min(len(scrape.readings) if scrape else 0, 32767),
    )  # fmt: skip
    # the exporter's driver label (dcgm-exporter, where its CSV declares one): "" for none
    driver = (version_or_none(scrape.driver) or "") if scrape and good else None
    return NodePoll(poll, samples, readings, (node.pk, health, detail[:2000], last_good, driver))


def _malformed(node, item: Fetched, *, now) -> NodePoll:
    detail = "the exporter's answer could not be stored"
    poll = (node.pk, now, 0, PollOutcome.MALFORMED, detail, 0)
    return NodePoll(poll, [], {}, (node.pk, NodeHealth.MALFORMED, detail, node.last_good_poll_at))


SAMPLE_COLUMNS = (
    "gpu_id", "at", "utilization", "memory_used_mib", "memory_total_mib", "power_w",
    "temperature_c", "energy_j", "xid",
)  # fmt: skip
SAMPLE_TYPES = ("int8", "timestamptz", *["float8"] * 6, "int4")
POLL_COLUMNS = ("node_id", "at", "duration_ms", "outcome", "error", "gpus_seen")
POLL_TYPES = ("int8", "timestamptz", "int4", "text", "text", "int2")


def rows_copy(table: str, columns, types, rows: list[tuple]) -> None:
    """Write rows with one binary COPY: building INSERTs of tens of thousands of literals
    cost more than the database's work."""
    if not rows:
        return
    statement = sql.copy_binary(table, tuple(columns))
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(statement) as copy,
    ):
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def samples_copy(samples: list[tuple]) -> None:
    """Store samples (rows of SAMPLE_COLUMNS)."""
    rows_copy("telemetry_gpusample", SAMPLE_COLUMNS, SAMPLE_TYPES, samples)


@transaction.atomic
def _store(results: list[NodePoll], gpus_by_node, now):
    """One transaction: the polls, their samples, the nodes' health and the flags."""
    rows_copy("telemetry_poll", POLL_COLUMNS, POLL_TYPES, [r.poll for r in results])
    samples_copy([s for r in results for s in r.samples])
    nodes_health_update([r.health for r in results], now)
    readings = {gpu: reading for r in results for gpu, reading in r.readings.items()}
    reading_flags_update(gpus_by_node, readings, now)


def store_polls(nodes, gpus_by_node, fetched: list[Fetched], *, now) -> dict:
    """Store a shard's polls in one transaction. Should the database refuse something one
    node sent, each node is stored on its own instead, and the refused ones are marked
    malformed: one bad exporter never blanks the others."""
    results = [
        _node_poll(
            nodes[item.node_id], gpus_by_node.get(item.node_id, []), item,
            now=now, stale_after=stale_window(),
        )
        for item in fetched
    ]  # fmt: skip
    try:
        _store(results, gpus_by_node, now)
    except DatabaseError:
        logger.exception("storing a shard of %s polls; storing node by node", len(results))
        for item, result in zip(fetched, results, strict=True):
            node = nodes[item.node_id]
            only = {node.pk: gpus_by_node.get(node.pk, [])}
            try:
                _store([result], only, now)
            except DatabaseError:
                logger.exception("storing node %s", node.pk)
                _store([_malformed(node, item, now=now)], only, now)
    return {"nodes": len(results), "samples": sum(len(r.samples) for r in results)}


def nodes_health_update(updates, now):
    """Every node's health in one statement, the values as five array parameters (rows of
    (node id, health, detail, last good poll[, the exporter's driver label or None])."""
    if not updates:
        return
    updates = [(*row, None) if len(row) == 4 else row for row in updates]
    ids, health, detail, last_good, driver = (list(column) for column in zip(*updates, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            sql.NODES_HEALTH,
            {"ids": ids, "health": [str(h) for h in health], "detail": detail,
             "last_good": last_good, "driver": driver, "now": now, "gap": stale_window()},
        )  # fmt: skip


def fleet_size_record(*, now: datetime | None = None) -> FleetSize:
    """This polling round's fleet size and how many of its GPUs answered lately (None when
    no node was polled lately), folded into the hour's row: the largest size and the fewest
    answering of its rounds that polled."""
    now = now or db_now()
    recent = now - timedelta(seconds=2 * settings.ANCHORGPU["POLL_INTERVAL"])
    with connection.cursor() as cursor:
        cursor.execute(
            sql.FLEET_SIZE_RECORD,
            {"now": now, "recent": recent, "hour": RollupBucket.HOUR, "active": NodeState.ACTIVE},
        )
        pk, at, gpus, reporting = cursor.fetchone()
    return FleetSize(id=pk, at=at, gpus=gpus, reporting=reporting)


def stale_window() -> timedelta:
    """How long without a good poll makes a node stale; polls of a node further apart than
    this break its run of polls (`Node.polled_since`)."""
    conf = settings.ANCHORGPU
    return timedelta(seconds=conf["POLL_INTERVAL"] * conf["STALE_AFTER_POLLS"])


def polled_since(node, now: datetime) -> datetime:
    """When the node's unbroken run of polls began, counting a poll at `now`: `now` itself
    after a gap (never polled, or not for longer than a staleness window), as
    NODES_HEALTH writes it."""
    last = node.last_poll_at
    if last is None or now - last > stale_window() or node.polled_since is None:
        return now
    return node.polled_since


def console_watching_since(*, now: datetime) -> datetime | None:
    """Since when the console has been polling the fleet without a gap: the earliest start
    of the runs of polls still going on (None: nothing is being polled now). Whatever went
    unheard before it is the console's gap, judged for nobody (derived from the nodes' rows,
    so it holds for every web and worker process alike)."""
    return Node.objects.filter(
        state=NodeState.ACTIVE, last_poll_at__gte=now - stale_window()
    ).aggregate(since=Min("polled_since"))["since"]


def nodes_mark_stale(*, now: datetime | None = None) -> int:
    """Nodes with no good poll for N intervals (for example, no worker polled them) are stale,
    once the console itself has been polling for that long: right after a start (or a gap
    of its own) nobody is stale for not having been polled."""
    now = now or db_now()
    cutoff = now - stale_window()
    watching = console_watching_since(now=now)
    if watching is None or watching > cutoff:
        return 0
    return (
        Node.objects.filter(state=NodeState.ACTIVE)
        .exclude(health__in=[NodeHealth.STALE, NodeHealth.UNKNOWN])
        .filter(Q(last_good_poll_at__lt=cutoff) | Q(last_good_poll_at__isnull=True))
        .exclude(last_poll_at__gte=cutoff, polled_since__gt=cutoff)  # polled, but not long
        .update(
            health=NodeHealth.STALE,
            health_detail=f"no good poll since before {cutoff:%H:%M:%S} UTC",
        )
    )
