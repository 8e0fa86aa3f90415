"""Telemetry's hand-written SQL, in one place: polling's writes, rollups, the reads that sum
parts of a time range, and the day partitions of raw samples.

A statement with a variable part is composed with `psycopg.sql` (`SQL(...).format(...)`,
`Identifier` for a table's name, `Placeholder` for a parameter's) and rendered to plain text
once, at import or in a cached function, so Django's query log and `CaptureQueriesContext`
see the text that runs. Enum words (a rollup's bucket, a node's state) are parameters,
never quoted in the text.
"""

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from psycopg.sql import SQL, Composable, Composed, Identifier, Literal, Placeholder

Names = Callable[[str], Placeholder]  # a parameter's name → its placeholder in a statement


def numbered(i: int) -> Names:
    """Placeholders of the `i`-th part of a `UNION ALL`: `%(start)s` becomes `%(start<i>)s`;
    `numbered_params` names the values the same way."""
    return lambda name: Placeholder(name + str(i))


def numbered_params(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of each part of a `UNION ALL` under their `numbered` names."""
    return {name + str(i): value for i, own in enumerate(parts) for name, value in own.items()}


def _union_all(parts: Iterable[Composable]) -> Composed:
    """Statements as one `UNION ALL` (one round trip)."""
    return SQL(" UNION ALL ").join(SQL("({})").format(part) for part in parts)


# --- Polling ---------------------------------------------------------------------------


@cache
def copy_binary(table: str, columns: tuple[str, ...]) -> str:
    """A binary COPY of `columns` into `table`: building INSERTs of tens of thousands of
    literals cost more than the database's work."""
    return (
        SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)")
        .format(Identifier(table), SQL(", ").join(map(Identifier, columns)))
        .as_string()
    )


# Every node's health in one statement, the values as five array parameters. A node polled
# again after a gap longer than `gap` (the console stopped, restarted, or polled nobody)
# starts a new run of polls: staleness counts from its start (`polled_since`).
NODES_HEALTH = """
UPDATE catalog_node n
SET health = u.health, health_detail = u.detail, last_good_poll_at = u.last_good,
    last_poll_at = %(now)s,
    polled_since = CASE WHEN n.last_poll_at IS NULL OR n.last_poll_at < %(now)s - %(gap)s
                        THEN %(now)s ELSE coalesce(n.polled_since, %(now)s) END,
    -- the exporter's driver label where the poll read the exporter (NULL: unchanged)
    exporter_driver_version = coalesce(u.driver, n.exporter_driver_version)
FROM unnest(%(ids)s::bigint[], %(health)s::text[], %(detail)s::text[],
            %(last_good)s::timestamptz[], %(driver)s::text[])
     AS u (id, health, detail, last_good, driver)
WHERE n.id = u.id
"""

# One row per hour (`hour`), however often the rounds run: a 90-day chart reads 2,160 rows,
# not the half a million rounds of 15 seconds.
# Answering is only known once a round has polled: before that (a fresh start, or the
# first round after the workers were down) it is NULL, which least() passes over.
FLEET_SIZE_RECORD = """
INSERT INTO telemetry_fleetsize (at, gpus, reporting)
SELECT date_trunc(%(hour)s, %(now)s::timestamptz, 'UTC'),
       (SELECT coalesce(sum(gpu_count), 0) FROM catalog_node WHERE state = %(active)s),
       CASE WHEN EXISTS (SELECT 1 FROM catalog_node
                         WHERE state = %(active)s AND last_poll_at >= %(recent)s)
            THEN (SELECT count(DISTINCT gpu_id) FROM telemetry_gpusample WHERE at >= %(recent)s)
       END
ON CONFLICT (at) DO UPDATE
    SET gpus = greatest(telemetry_fleetsize.gpus, excluded.gpus),
        reporting = least(telemetry_fleetsize.reporting, excluded.reporting)
RETURNING id, at, gpus, reporting
"""


# --- Ingest from the operator's engine (`telemetry.remote`) -----------------------------

# A shard's minutes are replaced whole: its GPUs' samples in [start, end) go, and what the
# engine holds for them is copied in after; pulling the same minutes again changes nothing.
SAMPLES_REPLACE = """
DELETE FROM telemetry_gpusample
WHERE gpu_id = ANY(%(gpu_ids)s) AND at >= %(start)s AND at < %(end)s
"""

# The shard's nodes' marks, moved to `until` (never back), one statement for the shard.
INGEST_MARKS_SET = """
INSERT INTO telemetry_ingestmark (node_id, ingested_until)
SELECT unnest(%(ids)s::bigint[]), %(until)s
ON CONFLICT (node_id) DO UPDATE
    SET ingested_until = greatest(telemetry_ingestmark.ingested_until, excluded.ingested_until)
"""

# The GPUs' newest sample at or after `since` (the live path writes only newer scrapes).
NEWEST_SAMPLES = """
SELECT gpu_id, max(at) FROM telemetry_gpusample
WHERE gpu_id = ANY(%(gpu_ids)s) AND at >= %(since)s
GROUP BY gpu_id
"""

# The earliest rewrite since the last rollup run, taken (deleted) by that run in its own
# transaction: a rewrite committed meanwhile stays for the next run.
REWRITTEN_TAKE = """
WITH taken AS (DELETE FROM telemetry_samplesrewritten RETURNING at)
SELECT min(at) FROM taken
"""


# --- Rollups ---------------------------------------------------------------------------

# One pass at a time per shard of the rollup (the parameter): a second one skips it.
ROLLUP_LOCK = "SELECT pg_try_advisory_xact_lock(hashtextextended('telemetry_rollup', %s))"
# One refresh of the sums after the shards at a time (the parameter: -1), waited for: a
# refresh queued while another runs does its own turn after it, never skips it.
ROLLUP_LOCK_WAIT = "SELECT pg_advisory_xact_lock(hashtextextended('telemetry_rollup', %s))"

# The earliest hour the shards' passes wrote since the last refresh, taken (NULL: none).
HOURS_WRITTEN_TAKE = """
WITH taken AS (DELETE FROM telemetry_hourswritten RETURNING at)
SELECT min(at) FROM taken
"""

# The rollup's shards: the GPU ids divided by the shard size (the parameter).
ROLLUP_SHARDS = "SELECT DISTINCT id / %s FROM catalog_gpu ORDER BY 1"

# The former per-GPU rollups emptied at once (13.5 TB of minute rows at 100k GPUs: no DELETE).
FORMER_ROLLUPS_TRUNCATE = "TRUNCATE telemetry_gpurollup"

# The oldest GPU hour (a first run's fleet rollups start there).
OLDEST_HOUR = "SELECT min(at) FROM telemetry_gpuhour"

# Energy and time come from each sample and the one before it (looked for up to LOOKBACK
# before the range, so a bucket's first interval is not lost): the interval belongs to the
# later sample's minute. The energy counter's rise is its delta; a drop is a reset (the GPU
# or exporter restarted), and the rise since the reset is the new value itself, as
# Prometheus' increase() counts it. An interval longer than MAX_GAP covers no time (the GPU
# was not seen), though the energy counter still tells what was used across it.
LOOKBACK = "1 hour"
MAX_GAP_SECONDS = 300


_NOTHING = SQL("")


def samples_with_deltas(
    *, since: Composable, until: Composable, where: Composable = _NOTHING
) -> Composed:
    """`WITH … d AS (…)`: the raw samples in [since, until) (SQL expressions), each with its
    `energy_rise` and `covered` seconds since the sample before it (looked for up to
    LOOKBACK earlier). The one definition of a counter's rise, for rollups and live reads.

    The sample before `since` is looked up per GPU (its newest in the LOOKBACK, by the
    samples' (gpu_id, at) index), not read with the whole LOOKBACK: the minute rollup asks
    for one minute every minute, and an hour of the fleet's samples ahead of it is 60 times
    what it rolls (at 100,000 GPUs, a run took 30 s; now 6–10 s). `where` narrows the GPUs
    by `gpu_id`, of the samples and of those looked up alike."""
    return SQL(
        """
WITH s AS (
    SELECT gpu_id, at, utilization, memory_used_mib, memory_total_mib, power_w, temperature_c,
           energy_j, lag(energy_j) OVER w AS energy_before,
           date_part('epoch', at - lag(at) OVER w) AS interval_s
    FROM (
        SELECT gpu_id, at, utilization, memory_used_mib, memory_total_mib, power_w,
               temperature_c, energy_j
        FROM telemetry_gpusample
        WHERE at >= {since} AND at < {until} {where}
        UNION ALL
        SELECT before.*
        FROM (SELECT * FROM (SELECT id AS gpu_id FROM catalog_gpu) AS gpus WHERE true {where})
            AS g
        CROSS JOIN LATERAL (
            SELECT b.gpu_id, b.at, b.utilization, b.memory_used_mib, b.memory_total_mib,
                   b.power_w, b.temperature_c, b.energy_j
            FROM telemetry_gpusample b
            WHERE b.gpu_id = g.gpu_id AND b.at >= {since} - interval {lookback} AND b.at < {since}
            ORDER BY b.gpu_id DESC, b.at DESC  -- the (gpu_id, at) index's order, read backward:
            LIMIT 1                            -- by `at` alone, the planner may walk the
        ) AS before                            -- fleet's samples on the `at` index
    ) AS samples
    WINDOW w AS (PARTITION BY gpu_id ORDER BY at)
), d AS (
    SELECT *,
           CASE WHEN energy_j >= energy_before THEN energy_j - energy_before
                WHEN energy_j < energy_before THEN energy_j END AS energy_rise,
           CASE WHEN interval_s <= {max_gap} THEN interval_s END AS covered
    FROM s WHERE at >= {since}
)
"""
    ).format(
        since=since,
        until=until,
        where=where,
        lookback=Literal(LOOKBACK),
        max_gap=Literal(MAX_GAP_SECONDS),
    )


# The columns of a GPU hour or day (`telemetry.models.GpuHourFigures`), in order.
FIGURES = (
    "samples", "util_sum", "util_samples", "util_max", "mem_max_mib", "mem_total_mib",
    "power_sum", "power_samples", "temp_max_c", "energy_j", "covered_s", "busy_s",
)  # fmt: skip

# How each figure adds up across buckets.
_ADD = {
    "samples": "sum", "util_sum": "sum", "util_samples": "sum", "util_max": "max",
    "mem_max_mib": "max", "mem_total_mib": "max", "power_sum": "sum", "power_samples": "sum",
    "temp_max_c": "max", "energy_j": "sum", "covered_s": "sum", "busy_s": "sum",
}  # fmt: skip
_NOT_NULL = {"util_sum", "power_sum", "covered_s", "busy_s"}  # sums of nothing are 0


def _added(figure: str, table: str = "") -> Composable:
    """`figure` added up over a group of rows (of `table`, an alias, where given)."""
    column = (
        SQL("{}.{}").format(Identifier(table), Identifier(figure)) if table else Identifier(figure)
    )
    added = SQL("{}({})").format(SQL(_ADD[figure]), column)
    return SQL("coalesce({}, 0)").format(added) if figure in _NOT_NULL else added


def _upsert(table: str, rows: Composable) -> Composed:
    """`INSERT INTO table (gpu_id, at, figures…) rows` that rewrites a row already there."""
    columns = SQL(", ").join(map(Identifier, ("gpu_id", "at", *FIGURES)))
    update = SQL(", ").join(SQL("{0} = EXCLUDED.{0}").format(Identifier(c)) for c in FIGURES)
    return SQL("INSERT INTO {} ({}) {} ON CONFLICT (gpu_id, at) DO UPDATE SET {}").format(
        Identifier(table), columns, rows, update
    )


_EPOCH = SQL("timestamptz '2000-01-01 00:00:00+00'")

# One pass over one shard's raw samples (GPU ids in [gpu_lo, gpu_hi)) from `read_from` to
# the start of the current minute (`minute_end`), with every GPU-minute kept inside the
# statement (never stored), yielding:
# - the GPU hours in [hours_from, hour_end): only hours that have closed (the caller's
#   rule: an hour closes once its last minute was rolled twice, late samples included);
# - the fleet's minutes from `minutes_from` on, summed per model and region for this shard
#   (`shard`: readers sum the shards);
# - each GPU's newest busy minute (GpuBusy), never moved back;
# - the shard's mark (`telemetry_rollupmark`: `minutes_mark`, `hours_mark`), moved in the
#   same transaction.
# Every row is upserted, so a rerun over the same samples rewrites the same rows, and a
# catch-up after an outage is this statement over the backlog, a few hours at a time (the
# caller's cap: `minute_end` is then a minute past a whole hour). Sums run in time order per
# GPU (the minutes come out of the window sorted), so a rerun gives the same figures to the
# last bit. Returns the GPU hours written, the earliest of them (NULL: none) and the fleet
# minutes written.
SHARD_ROLLUP = (
    SQL(
        """{samples}, m AS MATERIALIZED (
    SELECT gpu_id, date_bin(interval '1 minute', at, {epoch}) AS at, count(*) AS samples,
        coalesce(sum(utilization), 0) AS util_sum, count(utilization) AS util_samples,
        max(utilization) AS util_max, max(memory_used_mib) AS mem_max_mib,
        max(memory_total_mib) AS mem_total_mib, coalesce(sum(power_w), 0) AS power_sum,
        count(power_w) AS power_samples, max(temperature_c) AS temp_max_c,
        sum(energy_rise) AS energy_j, coalesce(sum(covered), 0) AS covered_s,
        coalesce(sum(covered) FILTER (WHERE utilization > %(threshold)s), 0) AS busy_s
    FROM d
    GROUP BY gpu_id, date_bin(interval '1 minute', at, {epoch})
), hours AS (
    {hour_upsert}
    RETURNING at
), fleet AS (
    INSERT INTO telemetry_fleetrollup AS f (bucket, at, gpu_model_id, region_id, shard, gpus,
        busy_gpus, samples, util_sum, util_samples, covered_s, busy_s, energy_j)
    SELECT %(minute)s, m.at, n.gpu_model_id, n.region_id, %(shard)s, count(*),
        count(*) FILTER (WHERE m.util_sum / nullif(m.util_samples, 0) > %(threshold)s),
        sum(m.samples), sum(m.util_sum), sum(m.util_samples), sum(m.covered_s),
        sum(m.busy_s), sum(m.energy_j)
    FROM m
    JOIN catalog_gpu g ON g.id = m.gpu_id
    JOIN catalog_node n ON n.id = g.node_id
    WHERE m.at >= %(minutes_from)s
    GROUP BY m.at, n.gpu_model_id, n.region_id
    ON CONFLICT (bucket, at, gpu_model_id, region_id, shard) DO UPDATE
        SET gpus = excluded.gpus, busy_gpus = excluded.busy_gpus, samples = excluded.samples,
            util_sum = excluded.util_sum, util_samples = excluded.util_samples,
            covered_s = excluded.covered_s, busy_s = excluded.busy_s, energy_j = excluded.energy_j
    RETURNING 1
), busy AS (  -- run whether read or not, as every data-modifying WITH is
    INSERT INTO telemetry_gpubusy AS b (gpu_id, at)
    SELECT gpu_id, max(at) FROM m
    WHERE at >= %(minutes_from)s AND util_max > %(threshold)s GROUP BY gpu_id
    ON CONFLICT (gpu_id) DO UPDATE SET at = excluded.at WHERE b.at < excluded.at
), mark AS (
    INSERT INTO telemetry_rollupmark AS k (shard, minutes_until, hours_until)
    VALUES (%(shard)s, %(minutes_mark)s, %(hours_mark)s)
    ON CONFLICT (shard) DO UPDATE
        SET minutes_until = excluded.minutes_until, hours_until = excluded.hours_until
)
SELECT (SELECT count(*) FROM hours), (SELECT min(at) FROM hours), (SELECT count(*) FROM fleet)
"""
    )
    .format(
        samples=samples_with_deltas(
            since=SQL("%(read_from)s::timestamptz"),
            until=SQL("%(minute_end)s::timestamptz"),
            where=SQL("AND gpu_id >= %(gpu_lo)s AND gpu_id < %(gpu_hi)s"),
        ),
        epoch=_EPOCH,
        hour_upsert=_upsert(
            "telemetry_gpuhour",
            SQL(
                "SELECT gpu_id, date_bin(interval '1 hour', at, {epoch}), {figures}"
                " FROM (SELECT * FROM m WHERE at >= %(hours_from)s AND at < %(hour_end)s"
                " ORDER BY gpu_id, at) AS closed"
                " GROUP BY gpu_id, date_bin(interval '1 hour', at, {epoch})"
            ).format(epoch=_EPOCH, figures=SQL(", ").join(_added(f) for f in FIGURES)),
        ),
    )
    .as_string()
)

# GPU days from GPU hours, for the days in [since, until) (whole days), rewritten where
# they are already there; summed in time order, as the hours are. Returns the days written
# and the earliest of them (NULL: none).
GPU_DAYS = (
    SQL(
        """WITH written AS (
    {upsert}
    RETURNING at
)
SELECT count(*), min(at) FROM written
"""
    )
    .format(
        upsert=_upsert(
            "telemetry_gpuday",
            SQL(
                "SELECT gpu_id, date_bin(interval '1 day', at, {epoch}), {figures}"
                " FROM (SELECT * FROM telemetry_gpuhour WHERE at >= %(since)s AND at < %(until)s"
                " ORDER BY gpu_id, at) AS hours"
                " GROUP BY gpu_id, date_bin(interval '1 day', at, {epoch})"
            ).format(epoch=_EPOCH, figures=SQL(", ").join(_added(f) for f in FIGURES)),
        )
    )
    .as_string()
)


@cache
def fleet_rollup(table: str) -> str:
    """The fleet's hours (days) from the GPU hours (days) `table` in [since, until), summed
    per model and region (shard 0); the figures add up exactly as the per-GPU reads add
    them (`telemetry.selectors.Totals`), so either source gives the same answer."""
    return (
        SQL(
            """
INSERT INTO telemetry_fleetrollup (bucket, at, gpu_model_id, region_id, shard, gpus, busy_gpus,
    samples, util_sum, util_samples, covered_s, busy_s, energy_j)
SELECT %(bucket)s, r.at, n.gpu_model_id, n.region_id, 0, count(*),
    count(*) FILTER (WHERE r.util_sum / nullif(r.util_samples, 0) > %(threshold)s),
    sum(r.samples), sum(r.util_sum), sum(r.util_samples), sum(r.covered_s), sum(r.busy_s),
    sum(r.energy_j)
FROM {table} r
JOIN catalog_gpu g ON g.id = r.gpu_id
JOIN catalog_node n ON n.id = g.node_id
WHERE r.at >= %(since)s AND r.at < %(until)s
GROUP BY r.at, n.gpu_model_id, n.region_id
"""
        )
        .format(table=Identifier(table))
        .as_string()
    )


# The end of the newest GPU hour or day.
@cache
def newest(table: str) -> str:
    return SQL("SELECT max(at) FROM {}").format(Identifier(table)).as_string()


# --- Reads over parts of a time range (`telemetry.selectors._plan`) ----------------------


# The end of what each level holds, per (source, bucket): a GPU day or a fleet row's end
# after the newest; GPU hours up to where every shard has closed them (the marks; before
# any mark, after the newest hour); the fleet's minutes up to where every shard has rolled
# them. One `%s` per fleet level for its bucket.
_ROLLED_UNTIL = {
    ("gpu", "day"): "(SELECT max(at) + interval '1 day' FROM telemetry_gpuday)",
    ("gpu", "hour"): "coalesce((SELECT min(hours_until) FROM telemetry_rollupmark),"
    " (SELECT max(at) + interval '1 hour' FROM telemetry_gpuhour))",
    ("fleet", "day"): "(SELECT max(at) + interval '1 day' FROM telemetry_fleetrollup"
    " WHERE bucket = %s)",
    ("fleet", "hour"): "(SELECT max(at) + interval '1 hour' FROM telemetry_fleetrollup"
    " WHERE bucket = %s)",
    ("fleet", "minute"): "least((SELECT min(minutes_until) FROM telemetry_rollupmark),"
    " (SELECT max(at) + interval '1 minute' FROM telemetry_fleetrollup WHERE bucket = %s))",
}


@cache
def rolled_until(levels: tuple[tuple[str, str], ...]) -> str:
    """The ends of the (source, bucket) levels asked for, in one statement."""
    ends = SQL(", ").join(SQL(_ROLLED_UNTIL[level]) for level in levels)
    return SQL("SELECT {}").format(ends).as_string()


# The columns of a `part_totals` row, named for queries that sum parts.
_PART_COLUMNS = SQL(
    "(gpu_id, samples, util_sum, util_samples, util_max, mem_max, energy, covered, busy)"
)

# Per GPU, what its hours (days) in `table` hold in [start, end).
_ROLLED = SQL(
    """
SELECT gpu_id, sum(samples)::bigint, sum(util_sum), sum(util_samples)::bigint, max(util_max),
       max(mem_max_mib), sum(energy_j), sum(covered_s), sum(busy_s)
FROM {table}
WHERE at >= {start} AND at < {end} {gpus}
GROUP BY gpu_id
"""
)
_GPU_TABLE = {"hour": "telemetry_gpuhour", "day": "telemetry_gpuday"}

# Per GPU, what the raw samples of `samples_with_deltas` say.
_RAW = SQL(
    """
SELECT gpu_id, count(*), sum(utilization), count(utilization), max(utilization),
       max(memory_used_mib), sum(energy_rise), sum(covered),
       sum(covered) FILTER (WHERE utilization > %(threshold)s)
FROM d GROUP BY gpu_id
"""
)


def _part_totals(kind: str, names: Names = Placeholder, *, by_gpus: bool = False) -> Composed:
    """Per GPU, the `Totals.add` columns of one part of a plan: raw samples (`kind` "raw"),
    GPU hours ("hour") or days ("day"), over [start, end), of the GPUs in `gpu_ids` where
    `by_gpus`."""
    gpus = SQL("AND gpu_id = ANY({})").format(names("gpu_ids")) if by_gpus else _NOTHING
    if kind == "raw":
        deltas = samples_with_deltas(
            since=SQL("{}::timestamptz").format(names("start")), until=names("end"), where=gpus
        )
        return SQL("{}{}").format(deltas, _RAW)
    table = Identifier(_GPU_TABLE[kind])
    return _ROLLED.format(table=table, start=names("start"), end=names("end"), gpus=gpus)


@cache
def part_totals(kind: str, *, by_gpus: bool) -> str:
    """`_part_totals` as a statement of its own (parameters start, end, threshold and
    gpu_ids)."""
    return _part_totals(kind, by_gpus=by_gpus).as_string()


@cache
def busy_gpus(kinds: tuple[str, ...]) -> str:
    """How many GPUs averaged over `threshold` across the parts `kinds` (their parameters
    `numbered`), counted by the database: one number, not a row per GPU."""
    parts = _union_all(_part_totals(kind, numbered(i)) for i, kind in enumerate(kinds))
    return (
        SQL(
            "SELECT count(*) FROM (SELECT 1 FROM ({parts}) AS t {columns} GROUP BY gpu_id"
            " HAVING sum(util_sum) / nullif(sum(util_samples), 0) > %(threshold)s) AS busy"
        )
        .format(parts=parts, columns=_PART_COLUMNS)
        .as_string()
    )


# Per model and region, what the fleet rollups of one bucket hold in [start, end).
_FLEET_ROLLED = SQL(
    """
SELECT gpu_model_id, region_id, sum(samples)::bigint, sum(util_sum), sum(util_samples)::bigint,
       NULL::float8, NULL::float8, sum(energy_j), sum(covered_s), sum(busy_s)
FROM telemetry_fleetrollup
WHERE bucket = {bucket} AND at >= {start} AND at < {end}
GROUP BY gpu_model_id, region_id
"""
)

# A per-GPU part summed per model and region.
_BY_GROUP = SQL(
    """
SELECT n.gpu_model_id, n.region_id, sum(t.samples)::bigint, sum(t.util_sum)::float8,
       sum(t.util_samples)::bigint,
       max(t.util_max), max(t.mem_max), sum(t.energy), sum(t.covered), sum(t.busy)
FROM ({part}) AS t {columns}
JOIN catalog_gpu g ON g.id = t.gpu_id
JOIN catalog_node n ON n.id = g.node_id
GROUP BY n.gpu_model_id, n.region_id
"""
)


@cache
def fleet_totals_by_group(kinds: tuple[str, ...], fleet_rolled: frozenset[str]) -> str:
    """Per (model, region), the parts `kinds` (their parameters `numbered`) as one
    statement: the buckets in `fleet_rolled` from the fleet rollups, the others from GPU
    hours and days and raw samples."""

    def part(i: int, kind: str) -> Composed:
        names = numbered(i)
        if kind in fleet_rolled:
            return _FLEET_ROLLED.format(
                bucket=names("bucket"), start=names("start"), end=names("end")
            )
        return _BY_GROUP.format(part=_part_totals(kind, names), columns=_PART_COLUMNS)

    return _union_all(part(i, kind) for i, kind in enumerate(kinds)).as_string()


# GPUs busy per rolled-up bucket of the fleet.
FLEET_BUSY_BY_BUCKET = """
SELECT at, sum(busy_gpus) FROM telemetry_fleetrollup
WHERE bucket = %(bucket)s AND at >= %(start)s AND at < %(end)s
GROUP BY at
"""

# The newest minute the fleet rollups hold in [start, end) (`bucket`: minute) that every
# shard has rolled, with the GPUs that reported in it (those with a sample in it) and those
# busy in it, summed over the shards.
FLEET_NEWEST_MINUTE = """
SELECT at, sum(busy_gpus), sum(gpus) FROM telemetry_fleetrollup
WHERE bucket = %(bucket)s AND at = (
    SELECT max(at) FROM telemetry_fleetrollup
    WHERE bucket = %(bucket)s AND at >= %(start)s AND at < %(end)s
      AND at < coalesce((SELECT min(minutes_until) FROM telemetry_rollupmark), 'infinity'))
GROUP BY at
"""

# A chart's minute points from raw samples, and its hourly points from GPU hours (the
# averages their sums make), in time order. The averages add up in time order, so the same
# samples give the same points to the last bit however they were written (polled, or
# ingested from an engine).
MINUTE_POINTS = """
SELECT gpu_id, date_bin(interval '1 minute', at, timestamptz '2000-01-01 00:00:00+00') AS at,
       avg(utilization ORDER BY at), max(memory_used_mib), max(memory_total_mib),
       avg(power_w ORDER BY at), max(temperature_c)
FROM telemetry_gpusample
WHERE gpu_id = ANY(%(gpu_ids)s) AND at >= %(start)s AND at < %(end)s
GROUP BY 1, 2
ORDER BY 2, 1
"""
HOUR_POINTS = """
SELECT gpu_id, at, util_sum / nullif(util_samples, 0), mem_max_mib, mem_total_mib,
       power_sum / nullif(power_samples, 0), temp_max_c
FROM telemetry_gpuhour
WHERE gpu_id = ANY(%(gpu_ids)s) AND at >= %(start)s AND at < %(end)s
ORDER BY at, gpu_id
"""

# Per GPU model, the largest memory total its GPUs' hours report since `since`.
MEMORY_TOTAL_BY_MODEL = """
SELECT n.gpu_model_id, max(h.mem_total_mib)
FROM telemetry_gpuhour h
JOIN catalog_gpu g ON g.id = h.gpu_id
JOIN catalog_node n ON n.id = g.node_id
WHERE h.at >= %(since)s AND h.mem_total_mib IS NOT NULL
GROUP BY n.gpu_model_id
"""

# Per `unit` (hour or day), the fleet's largest size and the fewest GPUs answering.
FLEET_SIZES = """
SELECT date_trunc(%(unit)s, at), max(gpus), min(reporting) FROM telemetry_fleetsize
WHERE at >= %(start)s AND at <= %(end)s
GROUP BY 1
"""

# The newest open flags with their node's hostname and GPU's index (a flag on the
# telemetry engine has no node: an empty hostname).
OPEN_FLAGS = """
SELECT f.id, f.kind, f.severity, f.detail, f.opened_at, f.last_seen_at, f.acknowledged_at,
       coalesce(n.hostname, '') AS node, g.index AS gpu_index
FROM telemetry_flag f
LEFT JOIN catalog_node n ON n.id = f.node_id
LEFT JOIN catalog_gpu g ON g.id = f.gpu_id
WHERE f.closed_at IS NULL
ORDER BY f.opened_at DESC, f.id DESC
LIMIT %(limit)s
"""


# --- Day partitions of raw samples (`telemetry.partitions`) -----------------------------

# The partitions of a table (its name as the one parameter).
PARTITIONS = """
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = %s::regclass
"""

# Whether a table of the name exists.
TABLE_EXISTS = "SELECT to_regclass(%s) IS NOT NULL"

# A partition with deferred foreign-key checks pending cannot be dropped: run them now.
CONSTRAINTS_IMMEDIATE = "SET CONSTRAINTS ALL IMMEDIATE"


def table_lock(table: str) -> str:
    """Locked against writes and a second partitioning run, not against reads."""
    return SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(Identifier(table)).as_string()


def partition_create(name: str, *, like: str) -> str:
    """A table shaped like the partitioned one, to attach as a partition."""
    return (
        SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        .format(Identifier(name), Identifier(like))
        .as_string()
    )


def partition_fill(name: str, *, default: str) -> str:
    """The default partition's rows in [start, end) moved into the new partition."""
    return (
        SQL(
            "WITH moved AS (DELETE FROM {default} WHERE at >= %(start)s AND at < %(end)s"
            " RETURNING *) INSERT INTO {name} SELECT * FROM moved"
        )
        .format(default=Identifier(default), name=Identifier(name))
        .as_string()
    )


def partition_attach(name: str, *, to: str) -> str:
    """The new table attached as `to`'s partition for [%s, %s)."""
    return (
        SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM (%s) TO (%s)")
        .format(Identifier(to), Identifier(name))
        .as_string()
    )


def partition_autovacuum(name: str) -> str:
    """A month of GPU hours is written an hour at a time and read by index-only scans, which
    need its pages marked all-visible: autovacuum visits it after 1 % new rows, not 20 %
    (a partitioned table takes no such setting: each partition does)."""
    return (
        SQL(
            "ALTER TABLE {} SET (autovacuum_vacuum_insert_scale_factor = 0.01,"
            " autovacuum_analyze_scale_factor = 0.005)"
        )
        .format(Identifier(name))
        .as_string()
    )


def table_drop(name: str) -> str:
    return SQL("DROP TABLE {}").format(Identifier(name)).as_string()


def rows_before_delete(table: str) -> str:
    """The rows of `table` older than the one parameter."""
    return SQL("DELETE FROM {} WHERE at < %s").format(Identifier(table)).as_string()


@cache
def copy_text(table: str, columns: tuple[str, ...]) -> str:
    """A text COPY of `columns` into `table` (the demo's backfill of hours)."""
    return (
        SQL("COPY {} ({}) FROM STDIN")
        .format(Identifier(table), SQL(", ").join(map(Identifier, columns)))
        .as_string()
    )
