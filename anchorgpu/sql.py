"""The scale generator's SQL (anchorgpu/scale.py): it writes every app's tables, so it lives
in the top layer. Telemetry's bulk (rollups, samples, polls, fleet rollups) is computed by
the database from generate_series, with deterministic values hashed from the GPU id and the
time: shipping tens of millions of rows from Python would be the slow part."""

from functools import cache

from psycopg.sql import SQL, Identifier

# Every table the generator writes, children first: a reset empties them in one statement.
TABLES = (
    "rentals_notice", "rentals_ledgerentry", "rentals_allocationevent", "rentals_allocationkey",
    "rentals_allocationgpu", "rentals_impairedspan", "rentals_allocation", "rentals_cluster",
    "rentals_quoteline", "rentals_quote", "rentals_idempotencykey", "rentals_allocatedstep",
    "rentals_ledgerday", "telemetry_flag",
    "telemetry_gpuhour", "telemetry_gpuday", "telemetry_rollupmark", "telemetry_gpubusy",
    "telemetry_fleetrollup", "telemetry_fleetsize",
    "telemetry_poll", "telemetry_gpusample", "catalog_gpu", "catalog_node", "accounts_membership",
    "accounts_team",
)  # fmt: skip


@cache
def truncate(tables: tuple[str, ...]) -> str:
    return (
        SQL("TRUNCATE {} RESTART IDENTITY CASCADE")
        .format(SQL(", ").join(map(Identifier, tables)))
        .as_string()
    )


@cache
def sequence_reset(table: str) -> str:
    """The id sequence past the ids the generator chose itself."""
    return (
        SQL("SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT coalesce(max(id), 0) + 1 FROM {}), false)")
        .format(Identifier(table))
        .as_string()
    )  # fmt: skip


@cache
def analyze(table: str) -> str:
    return SQL("ANALYZE {}").format(Identifier(table)).as_string()


# The generator's foreign keys checked as each COPY ends (anchorgpu.scale).
CONSTRAINTS_IMMEDIATE = "SET CONSTRAINTS ALL IMMEDIATE"


@cache
def vacuum_analyze(table: str) -> str:
    return SQL("VACUUM (ANALYZE) {}").format(Identifier(table)).as_string()


# A GPU's busy level: a stable share per GPU (hashed from its id) that moves with the hour
# of the day; a few GPUs idle. `h` is the bucket's time, `g` the GPU row.
_UTIL = """least(100, greatest(0,
        ((g.id * 2654435761) %% 97)::float8
        + 10 * sin(extract(epoch FROM h) / 13751.0 + g.id)
    ))"""


@cache
def hours_fill(table: str) -> str:
    """GPU hours (days) in `table` for every GPU of the fleet over [from, until)."""
    return (
        SQL(
            """
INSERT INTO {table} (gpu_id, at, samples, util_sum, util_samples, util_max, mem_max_mib,
    mem_total_mib, power_sum, power_samples, temp_max_c, energy_j, covered_s, busy_s)
SELECT g.id, h, %(samples)s, u.util * %(samples)s, %(samples)s, least(100, u.util + 12), 60000,
       81559, (80 + 6 * u.util) * %(samples)s, %(samples)s, 45 + u.util / 3,
       (80 + 6 * u.util) * %(seconds)s, %(seconds)s,
       CASE WHEN u.util > %(threshold)s THEN %(seconds)s ELSE 0 END
FROM catalog_gpu g
CROSS JOIN generate_series(%(from)s, %(until)s - %(step)s, %(step)s) AS h
CROSS JOIN LATERAL (SELECT {util} AS util) u
"""
        )
        .format(table=Identifier(table), util=SQL(_UTIL))
        .as_string()
    )


# Raw samples every poll interval over [from, until), as the poller stores them.
SAMPLES_FILL = (
    SQL(
        """
INSERT INTO telemetry_gpusample (gpu_id, at, utilization, memory_used_mib, memory_total_mib,
    power_w, temperature_c, energy_j, xid)
SELECT g.id, h, u.util, 60000, 81559, 80 + 6 * u.util, 45 + u.util / 3,
       extract(epoch FROM h - %(from)s) * (80 + 6 * u.util), NULL
FROM catalog_gpu g
CROSS JOIN generate_series(%(from)s, %(until)s - %(step)s, %(step)s) AS h
CROSS JOIN LATERAL (SELECT {util} AS util) u
"""
    )
    .format(util=SQL(_UTIL))
    .as_string()
)

# One poll per node per interval over [from, until), every one answered.
POLLS_FILL = """
INSERT INTO telemetry_poll (node_id, at, duration_ms, outcome, error, gpus_seen)
SELECT n.id, h, 40 + n.id %% 60, %(outcome)s, '', n.gpu_count
FROM catalog_node n
CROSS JOIN generate_series(%(from)s, %(until)s - %(step)s, %(step)s) AS h
"""

# The fleet rollups per GPU model and region for every bucket of [from, until): what the
# staff dashboard's long ranges read (for the years the per-GPU hours were not generated).
FLEET_FILL = """
INSERT INTO telemetry_fleetrollup (bucket, at, gpu_model_id, region_id, shard, gpus, busy_gpus,
    samples, util_sum, util_samples, covered_s, busy_s, energy_j)
SELECT %(bucket)s, h, f.gpu_model_id, f.region_id, 0, f.gpus,
       (f.gpus * (0.55 + 0.2 * sin(extract(epoch FROM h) / 13751.0)))::int,
       f.gpus * %(samples)s, f.gpus * %(samples)s * 48.0, f.gpus * %(samples)s,
       f.gpus * %(seconds)s, f.gpus * %(seconds)s * 0.6, f.gpus * 300.0 * %(seconds)s
FROM (SELECT n.gpu_model_id, n.region_id, count(*) AS gpus
      FROM catalog_gpu g JOIN catalog_node n ON n.id = g.node_id
      GROUP BY n.gpu_model_id, n.region_id) f
CROSS JOIN generate_series(%(from)s, %(until)s - %(step)s, %(step)s) AS h
"""

# The fleet's size per hour (`FleetSize`): the dashboard's "total" line.
FLEET_SIZE_FILL = """
INSERT INTO telemetry_fleetsize (at, gpus, reporting)
SELECT h, (SELECT count(*) FROM catalog_gpu), (SELECT count(*) FROM catalog_gpu)
FROM generate_series(%(from)s, %(until)s, interval '1 hour') AS h
"""
