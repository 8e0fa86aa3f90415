"""Chart points read from the operator's engine (TELEMETRY_SOURCE=prometheus): a GPU's
minutes as the embedded path's minute figures give them (average utilisation, highest
memory used, memory total, average power, highest temperature), computed by the engine over
each minute [m, m + 1 min) with `query_range`, for as long as the engine keeps samples.

Five requests per chart, one per figure, whatever the number of GPUs, sent at once (an
engine evaluates one query on one core: a week of 8 GPUs is about 2.4 s of Prometheus's CPU
in all). Each figure is a PromQL expression over the GPUs' series, selected by the node label
and the exporters' own family names (as the ingest selects them, telemetry/remote.py); a GPU
is found by its node's label and its UUID (NVIDIA) or serial (AMD), as the ingest maps it. A
week of minutes is 10,080 points per series, under Prometheus's 11,000 (VictoriaMetrics
allows 30,000).

Where the engine gives nothing (it cannot be read, answers an error, or holds no sample of
these GPUs in the range) the result says why and the caller reads the database instead.
Differences from the embedded path, where they cannot be avoided in PromQL (no per-sample
filter or sum before a `*_over_time` without a subquery's resampling):
- a minute that holds a DCGM blank in a figure's samples has no value for that figure (the
  embedded path leaves the blank out and averages the rest);
- the memory total is the minute's last used + free + reserved (the embedded path takes
  its highest: the same for a GPU whose memory does not change size), and where an exporter
  serves no free memory it is used + reserved (the embedded path has none);
- a MIG GPU's memory is the sum of each slice's highest, and its utilisation the highest of
  each slice's average (the embedded path sums, or takes the highest, per sample first).
"""

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from catalog.models import ExporterKind, Gpu, Node
from telemetry.parse import MIB, amd_key
from telemetry.promapi import Engine, EngineError, Series, at_ms, label_value, ms_of
from telemetry.promapi import regex_alternatives as alternatives

logger = logging.getLogger(__name__)

MAX_POINTS = 11_000  # per series: Prometheus refuses more in one range query
# A figure above this is a DCGM blank (near 2**63 or 2**47) in the minute, not a reading.
PLAUSIBLE_MAX = 1e9
FIGURES = ("util", "mem", "mem_total", "power", "temp")
_NO_FIGURES: dict[str, float | None] = dict.fromkeys(FIGURES)
AMD_MIB = repr(1e6 / MIB)  # the AMD exporter's MB in MiB, the reader's factor exactly

# Why the engine's points are not shown (`EngineSeries.reason`).
UNREACHABLE = "unreachable"  # no answer, an error status, or not the API's JSON
NO_DATA = "no_data"  # no sample of these GPUs in the range (older than its retention)
TOO_LONG = "too_long"  # more points per series than the engine gives in one query


@dataclass(frozen=True)
class EngineSeries:
    """Per GPU (by pk) its points in `gpu_series`'s shape, and the first minute the engine
    has for any of them (`since`); or, where `points` is None, why not."""

    points: dict[int, list[dict[str, Any]]] | None
    since: datetime | None = None
    reason: str = ""
    detail: str = ""


def _by(node_label: str) -> str:
    """The labels that name one GPU, whichever exporter wrote it (telemetry.parse's keys):
    grouping by them folds a high-availability pair's replicas into one series."""
    return f"{node_label}, UUID, uuid, serial_number, gpu_uuid, gpu_id"


class _Query:
    """The figures of some nodes' GPUs as PromQL, for one window length."""

    def __init__(self, node_label: str, window: str):
        self.node_label, self.window, self.by = node_label, window, _by(node_label)

    def _over(self, function: str, name: str, hosts: str, extra: str = "", op: str = "=") -> str:
        return (
            f'{function}({{__name__{op}"{label_value(name)}",'
            f'{self.node_label}=~"{hosts}"{extra}}}[{self.window}])'
        )

    def dcgm(self, hosts: str) -> dict[str, str]:
        by = self.by

        # MIG slices add up, a pair's replicas do not. The total reads the three families
        # in one selector (`last_over_time` keeps each series' name, so they stay apart
        # until summed): a third of the work of adding three sums.
        fb = self._over("last_over_time", "DCGM_FI_DEV_FB_(USED|FREE|RESERVED)", hosts, op="=~")
        used = self._over("max_over_time", "DCGM_FI_DEV_FB_USED", hosts)
        util = self._over("avg_over_time", "DCGM_FI_DEV_GPU_UTIL", hosts)
        engine_active = self._over("avg_over_time", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", hosts)
        power = self._over("avg_over_time", "DCGM_FI_DEV_POWER_USAGE", hosts)
        temp = self._over("max_over_time", "DCGM_FI_DEV_GPU_TEMP", hosts)
        return {
            "util": f"(avg by ({by}) ({util})) or (100 * max by ({by}) ({engine_active}))",
            "mem": f"sum by ({by}) (max by ({by}, GPU_I_ID) ({used}))",
            "mem_total": f"sum by ({by}) (max by ({by}, GPU_I_ID, __name__) ({fb}))",
            "power": f"avg by ({by}) ({power})",
            "temp": f"max by ({by}) ({temp})",
        }

    def amd(self, hosts: str, prefix: str) -> dict[str, str]:
        by = self.by
        partition = ',gpu_partition_id=~"|0|NA"'  # partition metrics: on partition 0 only

        def one(function: str, outer: str, *names: str) -> str:  # the first one served
            return " or ".join(
                f"({outer} by ({by}) ({self._over(function, prefix + name, hosts, partition)}))"
                for name in names
            )

        powers = ("gpu_power_usage", "gpu_package_power", "gpu_average_package_power")
        temps = ("gpu_edge_temperature", "gpu_junction_temperature")
        return {
            "util": one("avg_over_time", "avg", "gpu_gfx_activity"),
            "mem": f"({one('max_over_time', 'max', 'gpu_used_vram')}) * {AMD_MIB}",
            "mem_total": f"({one('max_over_time', 'max', 'gpu_total_vram')}) * {AMD_MIB}",
            "power": one("avg_over_time", "avg", *powers),
            "temp": one("max_over_time", "max", *temps),
        }


def figure_queries(nodes: Iterable[Node], *, node_label: str, window: str) -> dict[str, str]:
    """The PromQL query of each figure of these nodes' GPUs, each value kept only where it is
    a plausible reading."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        prefix = node.metric_prefix if node.exporter == ExporterKind.AMD else ""
        groups.setdefault((node.exporter, prefix), []).append(node.hostname)
    query = _Query(node_label, window)
    parts: dict[str, list[str]] = {figure: [] for figure in FIGURES}
    for (exporter, prefix), hostnames in sorted(groups.items()):
        hosts = label_value(alternatives(hostnames))
        exprs = query.amd(hosts, prefix) if exporter == ExporterKind.AMD else query.dcgm(hosts)
        for figure in FIGURES:
            parts[figure].append(f"({exprs[figure]})")
    return {figure: f"({' or '.join(parts[figure])}) <= {PLAUSIBLE_MAX:g}" for figure in FIGURES}


def _points(
    answers: dict[str, list[Series]],
    gpus: list[Gpu],
    nodes: dict[int, Node],
    *,
    node_label: str,
    step_ms: int,
) -> dict[int, dict[int, dict[str, Any]]]:
    """{GPU pk: {minute's start in ms: its figures}} from the engine's series: each series
    given to a GPU by its node's label and its key, as the readers key a GPU. (A week of 8
    GPUs is 400,000 values: each minute's time is written once, whatever the GPUs.)"""
    hostname_of = {pk: node.hostname for pk, node in nodes.items()}
    gpu_of: dict[tuple[str, str], int] = {}
    for gpu in gpus:
        hostname = hostname_of[gpu.node_id]
        gpu_of[(hostname, gpu.uuid)] = gpu.pk
        gpu_of.setdefault((hostname, f"gpu_id:{gpu.index}"), gpu.pk)
    found: dict[int, dict[int, dict[str, Any]]] = {gpu.pk: {} for gpu in gpus}
    stamps: dict[int, str] = {}
    for figure, one in ((f, one) for f, series in answers.items() for one in series):
        labels = one.labels
        key = labels.get("UUID") or labels.get("uuid") or amd_key(labels)
        gpu_pk = gpu_of.get((labels.get(node_label, ""), key or ""))
        if gpu_pk is None:
            continue
        points = found[gpu_pk]
        for ms, raw in one.points:
            try:
                value = float(raw)
            except ValueError:
                continue
            if value != value:  # NaN: no reading
                continue
            minute = ms + 1 - step_ms  # evaluated a millisecond before the minute's end
            point = points.get(minute)
            if point is None:
                stamp = stamps.get(minute)
                if stamp is None:
                    stamp = stamps[minute] = at_ms(minute).isoformat()
                point = points[minute] = {"t": stamp, **_NO_FIGURES}
            point[figure] = value
    return found


def engine_gpu_series(
    *, gpus: list[Gpu], start: datetime, end: datetime, step: timedelta
) -> EngineSeries:
    """The GPUs' points from the engine, one per whole `step` in [start, end) (the first
    starting at or after `start`, each stamped with its start), a query per figure sent at
    once; or why not."""
    conf = settings.ANCHORGPU["PROMETHEUS"]
    node_label = conf["NODE_LABEL"]
    step_ms = step // timedelta(milliseconds=1)
    first = -(-ms_of(start) // step_ms) * step_ms
    evaluated_from, evaluated_until = first + step_ms - 1, ms_of(end) - 1
    if evaluated_until < evaluated_from or not gpus:
        return EngineSeries(None, reason=NO_DATA, detail="no whole step in the range")
    if (evaluated_until - evaluated_from) // step_ms + 1 > MAX_POINTS:
        return EngineSeries(None, reason=TOO_LONG, detail=f"more than {MAX_POINTS} points")
    nodes = {
        node.pk: node
        for node in Node.objects.filter(pk__in={gpu.node_id for gpu in gpus}).only(
            "id", "hostname", "exporter", "metric_prefix"
        )
    }
    queries = figure_queries(nodes.values(), node_label=node_label, window=f"{step_ms}ms")
    try:
        with Engine(conf) as engine, ThreadPoolExecutor(len(queries)) as pool:

            def read(query: str) -> list[Series]:
                return engine.range_query(
                    query, start=at_ms(evaluated_from), end=at_ms(evaluated_until), step=step
                )

            answers = dict(zip(queries, pool.map(read, queries.values()), strict=True))
    except EngineError as exc:
        # The engine's words are the operator's (its flag and the log), not the customer's.
        logger.warning("telemetry engine: chart of %s GPUs not read: %s", len(gpus), exc)
        return EngineSeries(None, reason=UNREACHABLE, detail=str(exc)[:200])
    found = _points(answers, gpus, nodes, node_label=node_label, step_ms=step_ms)
    minutes = [minute for by_minute in found.values() for minute in by_minute]
    if not minutes:
        return EngineSeries(None, reason=NO_DATA, detail="no samples of these GPUs in the range")
    return EngineSeries(
        {pk: [by_minute[m] for m in sorted(by_minute)] for pk, by_minute in found.items()},
        since=at_ms(min(minutes)),
    )


def engine_series_response(
    found: EngineSeries,
    *,
    gpus: list[Gpu],
    start: datetime,
    end: datetime,
    before: dict[str, Any] | None,
) -> dict[str, Any]:
    """`gpu_series`'s answer from the engine's points (`source`: engine). Where the engine's
    first minute is later than `start`, `before` holds the database's answer for the range
    up to it: its points lead, and `engine_from` and `source_before` say where each begins."""
    assert found.points is not None and found.since is not None
    earlier = {  # the database's points before the engine's first minute
        g["uuid"]: [p for p in g["points"] if datetime.fromisoformat(p["t"]) < found.since]
        for g in (before["gpus"] if before else [])
    }
    answer: dict[str, Any] = {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "source": "engine",
        "gpus": [
            {
                "uuid": gpu.uuid,
                "index": gpu.index,
                "points": [*earlier.get(gpu.uuid, []), *found.points[gpu.pk]],
            }
            for gpu in sorted(gpus, key=lambda gpu: gpu.index)
        ],
    }
    if before is not None:
        answer["engine_from"] = found.since.isoformat()
        answer["source_before"] = before["source"]
    return answer
