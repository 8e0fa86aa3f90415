"""The capacity read model's refresh (rentals.models.summary): one statement per GPU model
that reads the model's live holdings once and rewrites its rows in every summary table."""

from psycopg.sql import SQL, Identifier

from rentals.sql.capacity import BUSY_BY_DAY
from rentals.sql.holdings import held_day_span, holding_overlaps

# Parameters: `model`, `active` (NodeState.ACTIVE), `now` (the rows' as_of), `first` (now's
# UTC midnight), `days` (days of CapacityDay and BookedAheadDay), `ahead` (now + 30 days:
# CapacityNode's horizon), `version` (the change version read before this statement).
#
# The rows are deleted and inserted by the same statement: its DELETEs see the rows as they
# were (the snapshot), never the ones its INSERTs add, so readers see the old set or the new
# one whole. Single-flight (an advisory lock per model, `LOCK`) keeps two refreshes of one
# model from interleaving, which is why the tables need no unique key.
#
# CapacityDay is FREE_BY_DAY_IN_REGION's count (rentals.sql.capacity), for every region of
# the model at once: its step functions are partitioned by region too, and each step's run
# (from its day to the next change) is spread over the days it covers, rather than every
# day crossed with every step and joined back to the changes. CapacityNode's
# fewest free is a sweep over each node's holdings in [now, ahead): +1 where one starts, -1
# where one ends, an end before a start at the same instant (holdings are half-open), the
# most held at once being the running sum's maximum (one GPU's live holdings never overlap,
# so holdings at once are GPUs at once). BookedAheadDay is the reports' BOOKED_AHEAD rule:
# allocations' GPU time per day from `first`, on the model's nodes in any state, and its
# arithmetic: holdings grouped by their span, each span's microseconds on its first and last
# day, and the days between whole through a running sum (not a row per holding and day:
# 68,000 of them for one model at 10k GPUs took most of the statement).
_REFRESH = SQL(
    """
WITH nodes AS MATERIALIZED (
    SELECT n.id, n.region_id, n.gpu_count AS gpus
    FROM catalog_node n
    WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s AND n.gpu_count > 0
), live AS MATERIALIZED (
    SELECT ag.node_id, ag.gpu_id, ag.starts_at, ag.ends_at
    FROM rentals_allocationgpu ag
    WHERE ag.node_id IN (SELECT id FROM nodes) AND {overlaps}
), {busy_by_day}, moves AS (
    SELECT b.k, nodes.region_id, nodes.gpus, b.busy,
           lag(b.busy, 1, 0::numeric) OVER (PARTITION BY b.node_id ORDER BY b.k) AS before
    FROM node_busy b JOIN nodes ON nodes.id = b.node_id
), bucket_day AS (
    SELECT k, region_id, gpus, busy, sum(delta) AS delta
    FROM (
        SELECT 0 AS k, region_id, gpus, 0::numeric AS busy, count(*) AS delta
        FROM nodes GROUP BY region_id, gpus
        UNION ALL SELECT k, region_id, gpus, before, -1 FROM moves WHERE before <> busy
        UNION ALL SELECT k, region_id, gpus, busy, 1 FROM moves WHERE before <> busy
    ) AS changes
    GROUP BY k, region_id, gpus, busy
), runs AS (
    SELECT k, region_id, gpus, busy,
           sum(delta) OVER (PARTITION BY region_id, gpus, busy ORDER BY k) AS nodes,
           lead(k, 1, %(days)s) OVER (PARTITION BY region_id, gpus, busy ORDER BY k) AS until
    FROM bucket_day
), grid AS (
    SELECT days.k, runs.region_id, runs.gpus, runs.busy, runs.nodes
    FROM runs
    CROSS JOIN LATERAL generate_series(runs.k, least(runs.until, %(days)s) - 1) AS days (k)
), day_rows AS (
    SELECT region_id, (%(first)s::timestamptz + k * interval '1 day')::date AS day,
           coalesce(max(gpus - busy) FILTER (WHERE nodes > 0), 0)::int AS one,
           coalesce(sum(nodes) FILTER (WHERE busy = 0), 0)::int AS whole,
           coalesce(sum(nodes * (gpus - busy)), 0)::int AS total
    FROM grid
    GROUP BY region_id, k
), node_edges AS (
    SELECT node_id, greatest(starts_at, %(now)s) AS at, 1 AS delta
    FROM live WHERE starts_at < %(ahead)s
    UNION ALL
    SELECT node_id, ends_at, -1 FROM live WHERE starts_at < %(ahead)s AND ends_at < %(ahead)s
), node_peak AS (
    SELECT node_id, max(held) AS most
    FROM (SELECT node_id, sum(delta) OVER (PARTITION BY node_id ORDER BY at, delta
                                           ROWS UNBOUNDED PRECEDING) AS held
          FROM node_edges) AS sweep
    GROUP BY node_id
), node_now AS (
    SELECT node_id, count(*) AS held FROM live
    WHERE starts_at <= %(now)s AND ends_at > %(now)s
    GROUP BY node_id
), booked_held AS (
    SELECT ag.starts_at, ag.ends_at, count(*) AS n
    FROM rentals_allocationgpu ag
    JOIN catalog_node n ON n.id = ag.node_id
    WHERE n.gpu_model_id = %(model)s AND NOT ag.released AND ag.allocation_id IS NOT NULL
      AND ag.ends_at > %(day0)s AND ag.starts_at < %(day_n)s
    GROUP BY ag.starts_at, ag.ends_at
), booked_spans AS (
    SELECT booked_held.n, x.s, x.e, x.i0, x.i1
    FROM booked_held
    {booked_day_span}
), booked_by_day AS (
    SELECT i0 AS i, n * (least(e, (i0 + 1) * %(day_us)s) - s) AS us, 0::bigint AS whole
    FROM booked_spans
    UNION ALL SELECT i1, n * (e - i1 * %(day_us)s), 0 FROM booked_spans WHERE i1 > i0
    UNION ALL SELECT i0 + 1, 0, n FROM booked_spans WHERE i1 > i0
    UNION ALL SELECT i1, 0, -n FROM booked_spans WHERE i1 > i0
), booked AS (
    SELECT d.i, sum(coalesce(h.us, 0)) + %(day_us)s * sum(sum(coalesce(h.whole, 0)))
                                               OVER (ORDER BY d.i) AS us
    FROM generate_series(0, %(days)s - 1) AS d (i)
    LEFT JOIN booked_by_day h ON h.i = d.i
    GROUP BY d.i
), gone_days AS (
    DELETE FROM rentals_capacityday WHERE gpu_model_id = %(model)s
), new_days AS (
    INSERT INTO rentals_capacityday
        (gpu_model_id, region_id, day, max_gpus_on_one_node, free_whole_nodes, free_gpus, as_of)
    SELECT %(model)s, region_id, day, one, whole, total, %(now)s FROM day_rows
), gone_nodes AS (
    DELETE FROM rentals_capacitynode WHERE gpu_model_id = %(model)s
), new_nodes AS (
    INSERT INTO rentals_capacitynode
        (node_id, gpu_model_id, region_id, gpus, free_now, min_free_30d, as_of)
    SELECT nodes.id, %(model)s, nodes.region_id, nodes.gpus,
           nodes.gpus - coalesce(node_now.held, 0), nodes.gpus - coalesce(node_peak.most, 0),
           %(now)s
    FROM nodes
    LEFT JOIN node_now ON node_now.node_id = nodes.id
    LEFT JOIN node_peak ON node_peak.node_id = nodes.id
), gone_ahead AS (
    DELETE FROM rentals_bookedaheadday WHERE gpu_model_id = %(model)s
), new_ahead AS (
    INSERT INTO rentals_bookedaheadday (gpu_model_id, day, gpu_us, as_of)
    SELECT %(model)s, (%(first)s::timestamptz + d.i * interval '1 day')::date,
           coalesce(round(booked.us), 0)::bigint, %(now)s
    FROM generate_series(0, %(days)s - 1) AS d (i)
    LEFT JOIN booked ON booked.i = d.i
)
INSERT INTO rentals_capacitysummary (gpu_model_id, as_of, version)
VALUES (%(model)s, %(now)s, %(version)s)
ON CONFLICT (gpu_model_id) DO UPDATE SET as_of = excluded.as_of, version = excluded.version
"""
)
REFRESH = _REFRESH.format(
    busy_by_day=BUSY_BY_DAY,
    booked_day_span=held_day_span(Identifier("booked_held")),
    overlaps=holding_overlaps(
        starts=SQL("%(now)s::timestamptz"),
        ends=SQL("%(first)s::timestamptz + %(days)s * interval '1 day'"),
    ),
).as_string()

# Single-flight: one refresh of a model at a time, across every worker (transaction-scoped).
LOCK = "SELECT pg_try_advisory_xact_lock(hashtextextended('rentals_capacity_summary', %(model)s))"


# Placement's first guess (`rentals.selectors.summary.capacity_nodes_fullest`): at most
# `%(limit)s` of the model's nodes that the summary, fresh since `%(fresh)s`, says have
# `%(count)s` GPUs free for the window, fullest first; by the GPUs free now for a window
# starting now (`NODES_FULLEST_NOW`), by the fewest free over the horizon for a later one
# (`NODES_FULLEST_AHEAD`, rows whose horizon reaches `%(horizon)s`); with `_IN_REGION`, of
# `%(region)s` only. Each booking asks one: written by hand, as the ORM's compile cost
# more CPU than the statement did.
def _nodes_fullest(free: str, *, ahead: bool, in_region: bool) -> str:
    return (
        SQL(
            """
SELECT c.node_id FROM rentals_capacitynode c
WHERE c.gpu_model_id = %(model)s AND c.as_of >= %(fresh)s AND c.{free} >= %(count)s{ahead}{region}
ORDER BY c.{free}, c.node_id
LIMIT %(limit)s
"""
        )
        .format(
            free=Identifier(free),
            ahead=SQL(" AND c.as_of >= %(horizon)s" if ahead else ""),
            region=SQL(" AND c.region_id = %(region)s" if in_region else ""),
        )
        .as_string()
    )


NODES_FULLEST_NOW = _nodes_fullest("free_now", ahead=False, in_region=False)
NODES_FULLEST_NOW_IN_REGION = _nodes_fullest("free_now", ahead=False, in_region=True)
NODES_FULLEST_AHEAD = _nodes_fullest("min_free_30d", ahead=True, in_region=False)
NODES_FULLEST_AHEAD_IN_REGION = _nodes_fullest("min_free_30d", ahead=True, in_region=True)
