"""Telemetry read from the operator's Prometheus, VictoriaMetrics or Mimir
(TELEMETRY_SOURCE=prometheus) instead of a second scrape of every node.

Two paths, sharded like polling (Celery on the `poll` queue):

- **Ingest, billing-grade** (`telemetry_ingest`, every minute). A shard's closed minutes are
  pulled as raw samples (never `increase()`: an engine's extrapolation or jitter rule is not
  our counter rule), read by the exporters' own readers (`telemetry.parse`), and copied into
  the samples table; rollups, usage, charts and dashboards read them as they read polled
  ones, so a counter's rise keeps its one definition (`sql.samples_with_deltas`). The
  shard's GPUs' samples in the pulled minutes are replaced whole and each node keeps a mark
  (`IngestMark`): pulling a minute again changes nothing, the last few minutes are pulled
  again for late remote-write data, and after an engine outage the marks say where to
  resume. One replica of a high-availability pair is kept per node (PROMETHEUS_REPLICA_LABEL),
  and a sample that reached the engine twice (the same scrape's timestamp) is read once.
- **Live** (`remote_poll_nodes`, every poll interval). One query for the newest scrape of
  each node within PROMETHEUS_LIVE_WINDOW_SECONDS (its `up`, sample count, duration and GPU
  families), and the targets API's `lastError` where a scrape failed, judged into the
  embedded poller's outcomes (`telemetry.poll.scrape_outcome`, `node_poll_of`) and flags.
  The newest readings are also written as samples (replaced when their minute is ingested),
  so activity flags, gauges and dashboards stay live.

An engine that cannot be read marks no node: it opens its own flag (`engine_unreachable`,
no node), nodes keep their health and are not marked stale, and the marks stay where they
were, so the minutes are ingested when it answers again.
"""

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q

from catalog.models import ExporterKind, Gpu, Node, NodeState
from core.db import db_now
from telemetry import sql
from telemetry.flags import FlagKey, flags_sync, reading_flags_update
from telemetry.models import Flag, FlagKind, IngestMark, PollOutcome, SamplesRewritten
from telemetry.parse import (
    AMD_FAMILIES,
    AMD_FIELDS,
    DCGM_FAMILIES,
    DCGM_FIELDS,
    Family,
    Sample,
    Scrape,
    families_scrape,
)
from telemetry.poll import (
    POLL_COLUMNS,
    POLL_TYPES,
    PolledGpu,
    node_poll_of,
    nodes_health_update,
    rows_copy,
    samples_copy,
    scrape_outcome,
    scrape_samples,
    stale_window,
)
from telemetry.promapi import (
    Engine,
    EngineError,
    Target,
    at_ms,
    label_value,
    regex_alternatives,
)

logger = logging.getLogger(__name__)

MINUTE = timedelta(minutes=1)
# A scrape's own series, written by the engine beside the exporter's (same timestamp).
SCRAPE_SERIES = ("up", "scrape_samples_scraped", "scrape_duration_seconds")
# Words of a scrape error that say the exporter did not answer in full (a timeout, a refused
# connection, an HTTP error status: Prometheus "server returned HTTP status 500",
# VictoriaMetrics "unexpected status code returned when scraping …: 500"): unreachable; and
# words that say its body could not be read (Prometheus "expected a valid start token",
# "unexpected end of input stream", "invalid metric type"): malformed.
TRANSPORT_ERROR_WORDS = ("status", "timeout", "deadline", "connect", "refused", "eof", "reset")
PARSE_ERROR_WORDS = ("expected", "unexpected", "invalid", "parse", "parsing")


def _conf() -> dict:
    return settings.ANCHORGPU["PROMETHEUS"]


def _minute_floor(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


@dataclass
class Shard:
    """The active nodes among some ids, their GPUs, and the series to ask the engine for."""

    nodes: dict[int, Node]
    gpus_by_node: dict[int, list[PolledGpu]]
    by_label: dict[str, Node]

    @classmethod
    def load(cls, node_ids) -> "Shard":
        nodes = {
            n.pk: n
            for n in Node.objects.filter(pk__any=list(node_ids), state=NodeState.ACTIVE).only(
                "id",
                "hostname",
                "exporter",
                "metric_prefix",
                "last_good_poll_at",
                "gpu_model_id",
                "last_poll_at",
                "polled_since",
            )
        }
        gpus_by_node: dict[int, list[PolledGpu]] = {}
        rows = Gpu.objects.filter(node_id__any=list(nodes)).values_list(
            "id", "node_id", "index", "uuid"
        )
        for row in rows:
            gpus_by_node.setdefault(row[1], []).append(PolledGpu(*row))
        return cls(nodes, gpus_by_node, {n.hostname: n for n in nodes.values()})

    def selector(self, *, extra=()) -> str:
        """`{__name__=~"<the families we read>", <node label>=~"<the shard's hostnames>"}`."""
        names = set(extra)
        for node in self.nodes.values():
            if node.exporter == ExporterKind.AMD:
                names.update(node.metric_prefix + name for name in AMD_FAMILIES)
            else:
                names.update(DCGM_FAMILIES)
        label = _conf()["NODE_LABEL"]
        return (
            f'{{__name__=~"{label_value(regex_alternatives(names))}",'
            f'{label}=~"{label_value(regex_alternatives(self.by_label))}"}}'
        )

    @property
    def gpu_ids(self) -> list[int]:
        return [g.pk for gpus in self.gpus_by_node.values() for g in gpus]


def scrapes_of(series, shard: Shard) -> dict[tuple[int, int], dict[str, Family]]:
    """The engine's samples as the scrapes they came from: per (node, timestamp in ms), the
    families of that scrape. Series are given to a node by the node label; one replica per
    node is kept (the one with the most samples, the lowest replica label on a tie), and
    samples of one series name, GPU and timestamp from several series are one scrape's,
    which the reader then counts as a duplicate and reads once."""
    conf = _conf()
    node_label, replica_label = conf["NODE_LABEL"], conf["REPLICA_LABEL"]
    groups: dict[int, dict[str, dict[int, dict[str, Family]]]] = {}
    counts: Counter = Counter()
    for one in series:
        labels = one.labels
        node = shard.by_label.get(labels.get(node_label))
        if node is None:
            continue
        name = labels.get("__name__", "")
        origin = labels.get(replica_label, "") if replica_label else ""
        by_ms = groups.setdefault(node.pk, {}).setdefault(origin, {})
        counts[(node.pk, origin)] += len(one.points)
        for ms, value in one.points:
            families = by_ms.get(ms)
            if families is None:
                families = by_ms[ms] = {}
            family = families.get(name)
            if family is None:
                family = families[name] = Family(name, [])
            family.samples.append(Sample(name, labels, value))
    scrapes = {}
    for node_id, origins in groups.items():
        chosen = max(sorted(origins), key=lambda origin: counts[(node_id, origin)])
        for ms, families in origins[chosen].items():
            scrapes[(node_id, ms)] = families
    return scrapes


def _scrape(node: Node, families: dict[str, Family]) -> Scrape:
    exporter_families = [f for name, f in families.items() if name not in SCRAPE_SERIES]
    return families_scrape(exporter_families, exporter=node.exporter, prefix=node.metric_prefix)


# --- The engine's own state ----------------------------------------------------------------


def engine_state_record(*, error: str | None, now: datetime) -> None:
    """The engine answered (`error` None: its flag closes) or not (its flag opens, or is
    seen again). A flag with no node: the nodes are not judged by the engine's failure."""
    holding: dict[FlagKey, str] = (
        {} if error is None else {(None, None, FlagKind.ENGINE_UNREACHABLE): error}
    )
    flags_sync(
        holding,
        decided=Q(kind=FlagKind.ENGINE_UNREACHABLE),
        now=now,
        kinds=(FlagKind.ENGINE_UNREACHABLE,),
    )


def engine_unreachable() -> bool:
    """Whether the engine's flag is open (then no node is marked stale for want of data)."""
    return Flag.objects.filter(kind=FlagKind.ENGINE_UNREACHABLE, closed_at__isnull=True).exists()


# --- Ingest: closed minutes of raw samples --------------------------------------------------


def ingest_window(marks: dict[int, datetime], node_ids, *, now: datetime):
    """[start, end) to pull for these nodes, and the mark they reach: from the earliest
    mark (a new node starts PROMETHEUS_REPULL_MINUTES back), at most
    PROMETHEUS_CATCHUP_MINUTES ahead, to the last minute closed PROMETHEUS_LAG_SECONDS ago;
    the last PROMETHEUS_REPULL_MINUTES of it pulled again for late data."""
    conf = _conf()
    closed = _minute_floor(now - timedelta(seconds=conf["LAG"]))
    repull = conf["REPULL_MINUTES"] * MINUTE
    start = min(marks.get(n, closed - repull) for n in node_ids)
    end = min(closed, start + conf["CATCHUP_MINUTES"] * MINUTE)
    return min(start, end - repull), max(end, start)


def telemetry_ingest(node_ids: list[int], *, now: datetime | None = None) -> dict:
    """Ingest a shard's closed minutes from the engine (see the module's docstring)."""
    now = now or db_now()
    shard = Shard.load(node_ids)
    if not shard.nodes:
        return {"nodes": 0, "samples": 0}
    marks = dict(
        IngestMark.objects.filter(node_id__any=list(shard.nodes)).values_list(
            "node_id", "ingested_until"
        )
    )
    start, end = ingest_window(marks, shard.nodes, now=now)
    if end <= start:
        return {"nodes": len(shard.nodes), "samples": 0}
    try:
        with Engine() as engine:
            series = engine.samples(shard.selector(), start=start, end=end)
    except EngineError as exc:
        logger.warning("telemetry engine: ingest of %s nodes failed: %s", len(shard.nodes), exc)
        engine_state_record(error=str(exc)[:200], now=now)
        return {"nodes": len(shard.nodes), "samples": 0, "engine": str(exc)}
    rows = []
    for (node_id, ms), families in scrapes_of(series, shard).items():
        node = shard.nodes[node_id]
        _readings, samples = scrape_samples(
            shard.gpus_by_node.get(node_id, []), _scrape(node, families), at_ms(ms)
        )
        rows.extend(samples)
    _ingest_store(shard, rows, start=start, end=end)
    engine_state_record(error=None, now=now)
    return {"nodes": len(shard.nodes), "samples": len(rows), "from": start, "until": end}


@transaction.atomic
def _ingest_store(shard: Shard, rows: list[tuple], *, start, end) -> None:
    """The shard's minutes in [start, end) replaced by what the engine holds, its marks
    moved to `end`, and the rollups told to start again at `start`: one transaction."""
    with connection.cursor() as cursor:
        cursor.execute(sql.SAMPLES_REPLACE, {"gpu_ids": shard.gpu_ids, "start": start, "end": end})
        samples_copy(rows)
        cursor.execute(sql.INGEST_MARKS_SET, {"ids": list(shard.nodes), "until": end})
    SamplesRewritten.objects.create(at=start)


# --- Live: node health and flags every interval ---------------------------------------------


def _failed_outcome(target) -> tuple[str, str]:
    """A scrape the engine marked failed (`up` 0): unreadable text is malformed, anything
    else (a timeout, a refused connection, an HTTP error) unreachable, as the poller says."""
    error = (target.last_error if target else "") or "the engine's scrape failed (up = 0)"
    lowered = error.lower()
    transport = any(word in lowered for word in TRANSPORT_ERROR_WORDS)
    if not transport and any(word in lowered for word in PARSE_ERROR_WORDS):
        return PollOutcome.MALFORMED, f"the engine could not read the exporter: {error}"
    return PollOutcome.UNREACHABLE, f"the engine could not scrape the exporter: {error}"


# The families the readers read that every exporter of their kind serves: not the
# alternatives (FB_RESERVED, the profiling utilisation, AMD's fallbacks), of which nodes of
# one model running other exporter versions may serve one and not another.
SERVED_BY_EVERY_EXPORTER = frozenset(
    {*DCGM_FIELDS, "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", *AMD_FIELDS}
)


def _gpu_key(labels: dict) -> str | None:
    return (
        labels.get("UUID")
        or labels.get("uuid")
        or labels.get("serial_number")
        or labels.get("gpu_id")
    )


def partial_scrapes(newest: dict[int, dict[str, Family]], nodes: dict[int, Node]) -> dict[int, str]:
    """{node id: why} for the `up = 1` scrapes of which the engine kept part (VictoriaMetrics
    stores what it could read of a truncated or partly bad body):
    - GPUs with fewer series than their siblings (cut inside a family);
    - or no GPU with a family every exporter of its kind serves (`SERVED_BY_EVERY_EXPORTER`)
      that other nodes of the same GPU model and exporter have in this round (cut between two
      families, so every GPU lost the same ones)."""
    per_gpu: dict[int, Counter[str]] = {}
    kept: dict[int, set[str]] = {}
    of_kind: dict[tuple[int, str], set[str]] = {}  # (GPU model, exporter): families kept
    for node_id, families in newest.items():
        node = nodes[node_id]
        counts: Counter[str] = Counter()
        names: set[str] = set()
        for name, family in families.items():
            if name in SCRAPE_SERIES:
                continue
            for sample in family.samples:
                if key := _gpu_key(sample.labels):
                    counts[key] += 1
                    names.add(name.removeprefix(node.metric_prefix or ""))
        per_gpu[node_id], kept[node_id] = counts, names & SERVED_BY_EVERY_EXPORTER
        of_kind.setdefault((node.gpu_model_id, node.exporter), set()).update(kept[node_id])
    partial: dict[int, str] = {}
    for node_id, counts in per_gpu.items():
        if not counts:
            continue
        node, most = nodes[node_id], max(counts.values())
        lost = of_kind[(node.gpu_model_id, node.exporter)] - kept[node_id]
        if len(set(counts.values())) > 1:
            short = sorted(key for key, n in counts.items() if n < most)
            partial[node_id] = (
                f"the engine kept part of the last scrape: fewer series for {', '.join(short[:8])}"
            )
        elif lost:
            partial[node_id] = (
                f"the engine kept part of the last scrape: no {', '.join(sorted(lost)[:4])}, "
                "which other nodes of its model have"
            )
    return partial


def _scrape_series(families, name) -> float | None:
    family = families.get(name)
    if family is None or not family.samples:
        return None
    try:
        return float(family.samples[0].value)
    except ValueError:
        return None


def failed_targets(engine: Engine, newest_failure: datetime, *, now: datetime) -> dict:
    """The engine's targets that are not up, by node, read from its targets API once per poll
    interval for every shard of the round (cached; at 100k nodes the API's answer is tens of
    megabytes). A cached read older than a shard's newest failed scrape cannot hold that
    scrape's error, so the shard reads again and caches its fresher answer."""
    interval = settings.ANCHORGPU["POLL_INTERVAL"]
    key = f"telemetry:failed-targets:{int(now.timestamp() // interval)}"
    cached = cache.get(key)
    if cached is not None and cached[0] >= newest_failure:
        return cached[1]
    read_at = db_now()
    label = _conf()["NODE_LABEL"]
    found = {t.labels.get(label): t for t in engine.targets() or [] if t.health != "up"}
    cache.set(key, (read_at, found), timeout=2 * interval)
    return found


def remote_poll_nodes(node_ids: list[int], *, now: datetime | None = None) -> dict:
    """Judge a shard's nodes from the engine's newest scrape of each (see the module's
    docstring). A node the engine has not scraped within the window is not judged (it
    turns stale by `nodes_mark_stale`, as a node nobody polled)."""
    now = now or db_now()
    conf = settings.ANCHORGPU
    shard = Shard.load(node_ids)
    if not shard.nodes:
        return {"nodes": 0, "samples": 0}
    window = timedelta(seconds=conf["PROMETHEUS"]["LIVE_WINDOW"])
    try:
        with Engine() as engine:
            series = engine.samples(
                shard.selector(extra=SCRAPE_SERIES),
                start=now - window,
                end=now + timedelta(seconds=1),
            )
            scrapes = scrapes_of(series, shard)
            newest: dict[int, int] = {}
            for node_id, ms in scrapes:
                if "up" in scrapes[(node_id, ms)] and ms > newest.get(node_id, -1):
                    newest[node_id] = ms
            failed = [n for n, ms in newest.items() if _scrape_series(scrapes[(n, ms)], "up") == 0]
            targets: dict[str, Target] = {}
            if failed:
                try:
                    newest_failure = at_ms(max(newest[n] for n in failed))
                    targets = failed_targets(engine, newest_failure, now=now)
                except EngineError as exc:  # the reason is a detail: the outcome still holds
                    logger.warning("telemetry engine: targets unavailable: %s", exc)
    except EngineError as exc:
        logger.warning("telemetry engine: live read of %s nodes failed: %s", len(shard.nodes), exc)
        engine_state_record(error=str(exc)[:200], now=now)
        return {"nodes": 0, "samples": 0, "engine": str(exc)}
    stale_after = stale_window()
    results, judged = [], {}
    partial = partial_scrapes(
        {n: scrapes[(n, ms)] for n, ms in newest.items() if n not in failed}, shard.nodes
    )
    for node_id, ms in newest.items():
        node, gpus = shard.nodes[node_id], shard.gpus_by_node.get(node_id, [])
        families = scrapes[(node_id, ms)]
        duration = _scrape_series(families, "scrape_duration_seconds")
        if _scrape_series(families, "up") == 0:
            outcome, detail = _failed_outcome(targets.get(node.hostname))
            scrape = None
        else:
            outcome, detail, scrape = scrape_outcome(gpus, _scrape(node, families))
            if outcome == PollOutcome.OK and node_id in partial:
                outcome, detail = PollOutcome.DEGRADED, partial[node_id]
        results.append(
            node_poll_of(
                node, gpus, outcome, detail, scrape, int((duration or 0) * 1000),
                now=now, stale_after=stale_after, seen_at=at_ms(ms),
            )
        )  # fmt: skip
        judged[node_id] = gpus
    written = _live_store(results, judged, now=now, since=now - 2 * window)
    engine_state_record(error=None, now=now)
    return {"nodes": len(results), "samples": written}


@transaction.atomic
def _live_store(results, gpus_by_node, *, now, since) -> int:
    """The polls, the nodes' health and the reading flags, as the poller stores them; then
    the newest readings as samples where they are newer than what is stored and past the
    node's ingest mark (the ingest replaces them with the engine's whole minute)."""
    rows_copy("telemetry_poll", POLL_COLUMNS, POLL_TYPES, [r.poll for r in results])
    nodes_health_update([r.health for r in results], now)
    readings = {gpu: reading for r in results for gpu, reading in r.readings.items()}
    # Flags before the samples: an XID is judged against the samples stored before now.
    reading_flags_update(gpus_by_node, readings, now)
    samples = [s for r in results for s in r.samples]
    if not samples:
        return 0
    gpu_ids = [s[0] for s in samples]
    with connection.cursor() as cursor:
        cursor.execute(sql.NEWEST_SAMPLES, {"gpu_ids": gpu_ids, "since": since})
        stored = dict(cursor.fetchall())
    node_of = {g.pk: node_id for node_id, gpus in gpus_by_node.items() for g in gpus}
    marks = dict(
        IngestMark.objects.filter(node_id__any=list(gpus_by_node)).values_list(
            "node_id", "ingested_until"
        )
    )
    fresh = [
        s
        for s in samples
        if (stored.get(s[0]) is None or s[1] > stored[s[0]])
        and (marks.get(node_of[s[0]]) is None or s[1] >= marks[node_of[s[0]]])
    ]
    samples_copy(fresh)
    return len(fresh)
