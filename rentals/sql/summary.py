"""The capacity read model's refresh (rentals.models.summary), per GPU model: a full one that
reads the model's live holdings once and rewrites its rows in every summary table, and an
incremental one that recomputes only some nodes' shares (CapacityNodeDays) and moves the
model's rows by the difference between their old shares and their new ones."""

from psycopg.sql import SQL, Composed, Identifier

from rentals.sql.capacity import BUSY_BY_DAY, fitting_at, stack_meets
from rentals.sql.holdings import held_day_span, holding_overlaps

# Parameters: `model`, `active` (NodeState.ACTIVE), `now` (the rows' as_of), `first` (now's
# UTC midnight) and `first_day` (its date), `days` (days of CapacityDay and BookedAheadDay),
# `ahead` (now + `horizon`, CapacityNode's 30 days), `version` (the change version read
# before this statement), `day0`, `day_n`, `day_us` (BookedAheadDay's days in µs), for the
# incremental refresh `nodes` (the node ids to recompute), and for a new day's (`ROLL`)
# `last` (the last day's date) and `last_but_one` (the day before it, its start).
#
# Each node's share, computed alike by both (`_shares`): the nodes in scope (the model's,
# or those of them named), those counted (active, with GPUs), their live holdings, and per
# node:
# - its GPUs held per day (rentals.sql.capacity.BUSY_BY_DAY's step function, the rule of
#   FREE_BY_DAY_IN_REGION), kept as its steps;
# - its GPUs free now and the fewest free over [now, ahead): a sweep over its holdings, +1
#   where one starts, -1 where one ends, an end before a start at the same instant
#   (holdings are half-open), the most held at once being the running sum's maximum (one
#   GPU's live holdings never overlap, so holdings at once are GPUs at once);
# - `due_at`, the first instant after `now` where those change by time alone: a holding
#   starting, one ending (it also leaves today's count, which counts from now), one's start
#   entering the horizon. Holdings starting after the days enter the horizon after the next
#   UTC midnight, whose first refresh reads their nodes (`ROLL_OWED`);
# - its share of BookedAheadDay, the reports' BOOKED_AHEAD rule: allocations' GPU time per
#   day from `first`, on nodes in any state, and its arithmetic: holdings grouped by their
#   span, each span's microseconds on its first and last day, and the days between whole
#   through a running sum (not a row per holding and day: 68,000 of them for one model at
#   10k GPUs took most of the full statement), kept per node as those parts per day.
#
# Rows are deleted and inserted by the same statement: its DELETEs see the rows as they
# were (the snapshot), never the ones its INSERTs add, so readers see the old set or the new
# one whole. Single-flight (an advisory lock per model, `LOCK`) keeps two refreshes of one
# model from interleaving, which is why the tables need no unique key.
_SHARES = SQL(
    """scope AS MATERIALIZED (
    SELECT n.id, n.region_id, n.gpu_count AS gpus,
           n.state = %(active)s AND n.gpu_count > 0 AS counted
    FROM catalog_node n
    WHERE n.gpu_model_id = %(model)s {only}
), nodes AS MATERIALIZED (
    SELECT id, region_id, gpus FROM scope WHERE counted
), live AS MATERIALIZED (
    SELECT ag.node_id, ag.gpu_id, ag.starts_at, ag.ends_at
    FROM rentals_allocationgpu ag
    WHERE ag.node_id IN (SELECT id FROM nodes) AND {overlaps}
), {busy_by_day}, node_steps AS (
    SELECT node_id, array_agg(k ORDER BY k) AS busy_from, array_agg(busy::int ORDER BY k) AS busy
    FROM node_busy
    GROUP BY node_id
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
), node_times AS (
    SELECT node_id,
           count(*) FILTER (WHERE starts_at <= %(now)s) AS held,
           least(min(starts_at) FILTER (WHERE starts_at > %(now)s), min(ends_at),
                 min(starts_at) FILTER (WHERE starts_at >= %(ahead)s) - %(horizon)s
                     + interval '1 microsecond') AS due_at
    FROM live
    GROUP BY node_id
), booked_held AS (
    SELECT ag.node_id, ag.starts_at, ag.ends_at, count(*) AS n
    FROM rentals_allocationgpu ag
    WHERE ag.node_id IN (SELECT id FROM scope) AND NOT ag.released
      AND ag.allocation_id IS NOT NULL AND ag.ends_at > %(day0)s AND ag.starts_at < %(day_n)s
    GROUP BY ag.node_id, ag.starts_at, ag.ends_at
), booked_spans AS (
    SELECT booked_held.node_id, booked_held.n, x.s, x.e, x.i0, x.i1
    FROM booked_held
    {booked_day_span}
), booked_by_day AS (
    SELECT node_id, i, sum(us)::bigint AS us, sum(whole)::bigint AS whole
    FROM (
        SELECT node_id, i0 AS i, n * (least(e, (i0 + 1) * %(day_us)s) - s) AS us,
               0::bigint AS whole
        FROM booked_spans
        UNION ALL SELECT node_id, i1, n * (e - i1 * %(day_us)s), 0
                  FROM booked_spans WHERE i1 > i0
        UNION ALL SELECT node_id, i0 + 1, 0, n FROM booked_spans WHERE i1 > i0
        UNION ALL SELECT node_id, i1, 0, -n FROM booked_spans WHERE i1 > i0
    ) AS parts
    GROUP BY node_id, i
), node_booked AS (
    SELECT node_id, array_agg(i ORDER BY i) AS booked_day, array_agg(us ORDER BY i) AS booked_us,
           array_agg(whole ORDER BY i) AS booked_whole
    FROM booked_by_day
    GROUP BY node_id
), shares AS MATERIALIZED (
    SELECT scope.id AS node_id, scope.region_id, scope.gpus, scope.counted,
           coalesce(node_steps.busy_from, '{{}}') AS busy_from,
           coalesce(node_steps.busy, '{{}}') AS busy,
           coalesce(node_booked.booked_day, '{{}}') AS booked_day,
           coalesce(node_booked.booked_us, '{{}}') AS booked_us,
           coalesce(node_booked.booked_whole, '{{}}') AS booked_whole,
           scope.gpus - coalesce(node_times.held, 0) AS free_now,
           scope.gpus - coalesce(node_peak.most, 0) AS min_free_30d,
           CASE WHEN scope.counted THEN node_times.due_at END AS due_at
    FROM scope
    LEFT JOIN node_steps ON node_steps.node_id = scope.id
    LEFT JOIN node_booked ON node_booked.node_id = scope.id
    LEFT JOIN node_times ON node_times.node_id = scope.id
    LEFT JOIN node_peak ON node_peak.node_id = scope.id
), put_shares AS (
    INSERT INTO rentals_capacitynodedays
        (node_id, gpu_model_id, region_id, gpus, counted, busy_from, busy, booked_day,
         booked_us, booked_whole, due_at, first_day, as_of)
    SELECT node_id, %(model)s, region_id, gpus, counted, busy_from, busy, booked_day,
           booked_us, booked_whole, due_at, %(first_day)s, %(now)s
    FROM shares
), put_nodes AS (
    INSERT INTO rentals_capacitynode
        (node_id, gpu_model_id, region_id, gpus, free_now, min_free_30d, as_of)
    SELECT node_id, %(model)s, region_id, gpus, free_now, min_free_30d, %(now)s
    FROM shares WHERE counted
)"""
)


def _shares(only: str) -> Composed:
    return _SHARES.format(
        only=SQL(only),
        busy_by_day=BUSY_BY_DAY,
        booked_day_span=held_day_span(Identifier("booked_held")),
        overlaps=holding_overlaps(
            starts=SQL("%(now)s::timestamptz"),
            ends=SQL("%(first)s::timestamptz + %(days)s * interval '1 day'"),
        ),
    )


_SUMMARY = """
INSERT INTO rentals_capacitysummary (gpu_model_id, as_of, version)
VALUES (%(model)s, %(now)s, %(version)s)
ON CONFLICT (gpu_model_id) DO UPDATE SET as_of = excluded.as_of, version = excluded.version
"""


# A day's CapacityDay figures from its node counts (`source`: rows of region_id, k (the
# day's index), gpus, busy and nodes): the most GPUs free on one node, the nodes with none
# busy and the GPUs free. The full refresh counts them from every node's steps, the
# incremental one from the buckets after its nodes moved.
def _day_rows(source: str) -> Composed:
    return SQL(
        """day_rows AS (
    SELECT region_id, k,
           coalesce(max(gpus - busy), 0)::int AS one,
           coalesce(sum(nodes) FILTER (WHERE busy = 0), 0)::int AS whole,
           coalesce(sum(nodes * (gpus - busy)), 0)::int AS total
    FROM {source}
    GROUP BY region_id, k
)"""
    ).format(source=Identifier(source))


# The full refresh: every node's share, and the model's rows from all of them. CapacityDay
# is FREE_BY_DAY_IN_REGION's count (rentals.sql.capacity), for every region of the model at
# once: nodes are counted per (region, GPUs, busy) bucket, each bucket's count a step
# function over the days (CapacityBucket keeps it per day), each step's run (from its day
# to the next change) spread over the days it covers, rather than every day crossed with
# every step and joined back to the changes.
_REFRESH = SQL(
    """
WITH {shares}, moves AS (
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
), grid AS MATERIALIZED (
    SELECT days.k, runs.region_id, runs.gpus, runs.busy, runs.nodes
    FROM runs
    CROSS JOIN LATERAL generate_series(runs.k, least(runs.until, %(days)s) - 1) AS days (k)
    WHERE runs.nodes > 0
), {day_rows_from_grid}, booked AS (
    SELECT d.i, sum(coalesce(h.us, 0)) + %(day_us)s * sum(sum(coalesce(h.whole, 0)))
                                               OVER (ORDER BY d.i) AS us
    FROM generate_series(0, %(days)s - 1) AS d (i)
    LEFT JOIN booked_by_day h ON h.i = d.i
    GROUP BY d.i
), gone_shares AS (
    DELETE FROM rentals_capacitynodedays WHERE gpu_model_id = %(model)s
), gone_buckets AS (
    DELETE FROM rentals_capacitybucket WHERE gpu_model_id = %(model)s
), put_buckets AS (
    INSERT INTO rentals_capacitybucket (gpu_model_id, region_id, day, gpus, busy, nodes)
    SELECT %(model)s, region_id, (%(first)s::timestamptz + k * interval '1 day')::date,
           gpus, busy::int, nodes::int
    FROM grid
), gone_days AS (
    DELETE FROM rentals_capacityday WHERE gpu_model_id = %(model)s
), put_days AS (
    INSERT INTO rentals_capacityday
        (gpu_model_id, region_id, day, max_gpus_on_one_node, free_whole_nodes, free_gpus, as_of)
    SELECT %(model)s, region_id, (%(first)s::timestamptz + k * interval '1 day')::date,
           one, whole, total, %(now)s
    FROM day_rows
), gone_nodes AS (
    DELETE FROM rentals_capacitynode WHERE gpu_model_id = %(model)s
), gone_ahead AS (
    DELETE FROM rentals_bookedaheadday WHERE gpu_model_id = %(model)s
), put_ahead AS (
    INSERT INTO rentals_bookedaheadday (gpu_model_id, day, gpu_us, as_of)
    SELECT %(model)s, (%(first)s::timestamptz + d.i * interval '1 day')::date,
           coalesce(round(booked.us), 0)::bigint, %(now)s
    FROM generate_series(0, %(days)s - 1) AS d (i)
    LEFT JOIN booked ON booked.i = d.i
){summary}"""
)
REFRESH = _REFRESH.format(
    shares=_shares(""), summary=SQL(_SUMMARY), day_rows_from_grid=_day_rows("grid")
).as_string()

# The incremental refresh: the named nodes' shares are recomputed (`shares`) and their old
# ones taken out (`old`); the model's rows move by the difference. Each counted node's GPUs
# busy per day, expanded from its steps (old: -1, new: +1), moves it between CapacityBucket's
# buckets on the days where it changed; those days' CapacityDay rows are recomputed from
# their buckets as they are after the moves (the stored ones and the moved ones: this
# statement's writes are not visible to it). BookedAheadDay moves by the difference of the
# parts per day, run through the same running sum. CapacityNode's rows of the named nodes
# are replaced. A change of a node's region, size or state is a change like any other: the
# old share leaves its old bucket, the new one enters its new one. An old share computed on
# an earlier UTC day (`first_day`) is read shifted to today's days (`shift`, negative): its
# steps before today start today, its partial days before today fall away and its whole
# days before today carry into today's running sum.
_REFRESH_NODES = SQL(
    """
WITH {shares}, old AS MATERIALIZED (
    DELETE FROM rentals_capacitynodedays
    WHERE gpu_model_id = %(model)s AND node_id = ANY(%(nodes)s)
    RETURNING region_id, gpus, counted, busy_from, busy, booked_day, booked_us, booked_whole,
              first_day - %(first_day)s AS shift
), busy_days AS (
    SELECT x.sign, x.region_id, x.gpus, d.k, s.b AS busy
    FROM (SELECT -1 AS sign, region_id, gpus, busy_from, busy, shift FROM old WHERE counted
          UNION ALL
          SELECT 1, region_id, gpus, busy_from, busy, 0 FROM shares WHERE counted) AS x
    CROSS JOIN LATERAL (
        SELECT s.k + x.shift AS k, s.b,
               lead(s.k + x.shift, 1, %(days)s) OVER (ORDER BY s.j) AS until
        FROM unnest(0 || x.busy_from, 0 || x.busy) WITH ORDINALITY AS s (k, b, j)
    ) AS s
    CROSS JOIN LATERAL generate_series(greatest(s.k, 0), s.until - 1) AS d (k)
), bucket_moves AS (
    SELECT region_id, k, gpus, busy, sum(sign) AS delta
    FROM busy_days
    GROUP BY region_id, k, gpus, busy
    HAVING sum(sign) <> 0
), touched AS (
    SELECT DISTINCT region_id, k FROM bucket_moves
), day_buckets AS MATERIALIZED (
    SELECT b.id, b.region_id, t.k, b.gpus, b.busy, b.nodes
    FROM touched t
    JOIN rentals_capacitybucket b
      ON b.gpu_model_id = %(model)s AND b.region_id = t.region_id
     AND b.day = (%(first)s::timestamptz + t.k * interval '1 day')::date
), moved AS MATERIALIZED (
    SELECT m.region_id, m.k, m.gpus, m.busy, b.id, coalesce(b.nodes, 0) + m.delta AS nodes
    FROM bucket_moves m
    LEFT JOIN day_buckets b
      ON b.region_id = m.region_id AND b.k = m.k AND b.gpus = m.gpus AND b.busy = m.busy
), after AS (
    SELECT region_id, k, gpus, busy, nodes FROM day_buckets
    WHERE id NOT IN (SELECT id FROM moved WHERE id IS NOT NULL)
    UNION ALL
    SELECT region_id, k, gpus, busy, nodes FROM moved WHERE nodes <> 0
), {day_rows_from_after}, gone_buckets AS (
    DELETE FROM rentals_capacitybucket WHERE id IN (SELECT id FROM moved)
), put_buckets AS (  -- a count below zero would be a fault: the table's check refuses it
    INSERT INTO rentals_capacitybucket (gpu_model_id, region_id, day, gpus, busy, nodes)
    SELECT %(model)s, region_id, (%(first)s::timestamptz + k * interval '1 day')::date,
           gpus, busy, nodes
    FROM moved WHERE nodes <> 0
), gone_days AS (
    DELETE FROM rentals_capacityday c
    USING touched t
    WHERE c.gpu_model_id = %(model)s AND c.region_id = t.region_id
      AND c.day = (%(first)s::timestamptz + t.k * interval '1 day')::date
), put_days AS (
    INSERT INTO rentals_capacityday
        (gpu_model_id, region_id, day, max_gpus_on_one_node, free_whole_nodes, free_gpus, as_of)
    SELECT %(model)s, region_id, (%(first)s::timestamptz + k * interval '1 day')::date,
           one, whole, total, %(now)s
    FROM day_rows
), gone_nodes AS (
    DELETE FROM rentals_capacitynode
    WHERE gpu_model_id = %(model)s AND node_id = ANY(%(nodes)s)
), booked_moves AS (
    SELECT greatest(u.i + x.shift, 0) AS i,
           coalesce(sum(x.sign * u.us) FILTER (WHERE u.i + x.shift >= 0), 0) AS us,
           sum(x.sign * u.whole) AS whole
    FROM (SELECT -1 AS sign, booked_day, booked_us, booked_whole, shift FROM old
          UNION ALL
          SELECT 1, booked_day, booked_us, booked_whole, 0 FROM shares) AS x
    CROSS JOIN LATERAL unnest(x.booked_day, x.booked_us, x.booked_whole) AS u (i, us, whole)
    GROUP BY 1
), booked_delta AS (
    SELECT d.i, coalesce(m.us, 0) + %(day_us)s * sum(coalesce(m.whole, 0)) OVER (ORDER BY d.i)
               AS us
    FROM generate_series(0, %(days)s - 1) AS d (i)
    LEFT JOIN booked_moves m ON m.i = d.i
    WHERE EXISTS (SELECT 1 FROM booked_moves)
), put_ahead AS (
    UPDATE rentals_bookedaheadday a SET gpu_us = a.gpu_us + d.us::bigint, as_of = %(now)s
    FROM booked_delta d
    WHERE a.gpu_model_id = %(model)s AND d.us <> 0
      AND a.day = (%(first)s::timestamptz + d.i * interval '1 day')::date
){summary}"""
)
REFRESH_NODES = _REFRESH_NODES.format(
    shares=_shares("AND n.id = ANY(%(nodes)s)"),
    summary=SQL(_SUMMARY),
    day_rows_from_after=_day_rows("after"),
).as_string()

# The nodes a refresh of the model owes a look: those changes marked (CapacityChange, taken
# here: the marks this statement's snapshot sees are deleted, later ones wait for the next
# refresh) and those whose figures move by time alone by `now` (CapacityNodeDays.due_at).
# A NULL among them: every node.
OWED = """
WITH marks AS (
    DELETE FROM rentals_capacitychange WHERE gpu_model_id = %(model)s RETURNING node_id
)
SELECT node_id FROM marks
UNION
SELECT node_id FROM rentals_capacitynodedays WHERE gpu_model_id = %(model)s AND due_at <= %(now)s
"""

# Nothing owed: the rows stand as they are, now as of `now`.
STANDS = _SUMMARY

# The first refresh of a UTC day, the day after the rows' (the incremental refresh's `ROLL`):
# the rows of the days before `first_day` go, and the new last day (`last`) starts as a copy
# of the day before it, which is what every node's share says of it, read shifted a day (a
# share's last step runs on to the days' end; booked-ahead time past the days' end is in no
# share). Then the nodes whose holdings touch either of those two days (`ROLL_OWED`, from
# `last_but_one`, the old last day's start, to `day_n`) are recomputed, with those due:
# every other node's share, shifted, says of each day what a full refresh would.
ROLL = """
WITH gone_buckets AS (
    DELETE FROM rentals_capacitybucket WHERE gpu_model_id = %(model)s AND day < %(first_day)s
), put_buckets AS (
    INSERT INTO rentals_capacitybucket (gpu_model_id, region_id, day, gpus, busy, nodes)
    SELECT gpu_model_id, region_id, %(last)s, gpus, busy, nodes
    FROM rentals_capacitybucket WHERE gpu_model_id = %(model)s AND day = %(last)s - 1
), gone_days AS (
    DELETE FROM rentals_capacityday WHERE gpu_model_id = %(model)s AND day < %(first_day)s
), put_days AS (
    INSERT INTO rentals_capacityday
        (gpu_model_id, region_id, day, max_gpus_on_one_node, free_whole_nodes, free_gpus, as_of)
    SELECT gpu_model_id, region_id, %(last)s, max_gpus_on_one_node, free_whole_nodes,
           free_gpus, %(now)s
    FROM rentals_capacityday WHERE gpu_model_id = %(model)s AND day = %(last)s - 1
), gone_ahead AS (
    DELETE FROM rentals_bookedaheadday WHERE gpu_model_id = %(model)s AND day < %(first_day)s
)
INSERT INTO rentals_bookedaheadday (gpu_model_id, day, gpu_us, as_of)
VALUES (%(model)s, %(last)s, 0, %(now)s)
"""

ROLL_OWED = """
SELECT DISTINCT ag.node_id
FROM rentals_allocationgpu ag
JOIN catalog_node n ON n.id = ag.node_id
WHERE n.gpu_model_id = %(model)s AND NOT ag.released
  AND ag.ends_at > %(last_but_one)s AND ag.starts_at < %(day_n)s
"""

# Marks for the next refresh (CapacityChange): each of `nodes` (NULL: all) of each of
# `models`, in the changing transaction.
MARK = """
INSERT INTO rentals_capacitychange (gpu_model_id, node_id)
SELECT m, n FROM unnest(%(models)s::bigint[]) AS m
CROSS JOIN unnest(coalesce(%(nodes)s::bigint[], '{NULL}')) AS n
"""

# Single-flight: one refresh of a model at a time, across every worker (transaction-scoped).
LOCK = "SELECT pg_try_advisory_xact_lock(hashtextextended('rentals_capacity_summary', %(model)s))"


# Placement's first guess (`rentals.selectors.summary.capacity_nodes_fullest`): at most
# `%(limit)s` of the model's nodes that the summary, fresh since `%(fresh)s`, says have
# `%(count)s` GPUs free for the window, fullest first; by the GPUs free now for a window
# starting now (`NODES_FULLEST_NOW`), by the fewest free over the horizon for a later one
# (`NODES_FULLEST_AHEAD`, rows whose horizon reaches `%(horizon)s`); with `_IN_REGION`, of
# `%(region)s` only. The rows stand as of their summary's `as_of` (CapacitySummary): an
# incremental refresh rewrites only the nodes whose figures changed, and vouches for the
# others. Each booking asks one: written by hand, as the ORM's compile cost more CPU than
# the statement did.
def _nodes_fullest(free: str, *, ahead: bool, in_region: bool) -> str:
    return (
        SQL(
            """
SELECT c.node_id FROM rentals_capacitynode c
JOIN rentals_capacitysummary s ON s.gpu_model_id = c.gpu_model_id
WHERE c.gpu_model_id = %(model)s AND s.as_of >= %(fresh)s AND c.{free} >= %(count)s{ahead}{region}
ORDER BY c.{free}, c.node_id
LIMIT %(limit)s
"""
        )
        .format(
            free=Identifier(free),
            ahead=SQL(" AND s.as_of >= %(horizon)s" if ahead else ""),
            region=SQL(" AND c.region_id = %(region)s" if in_region else ""),
        )
        .as_string()
    )


NODES_FULLEST_NOW = _nodes_fullest("free_now", ahead=False, in_region=False)
NODES_FULLEST_NOW_IN_REGION = _nodes_fullest("free_now", ahead=False, in_region=True)
NODES_FULLEST_AHEAD = _nodes_fullest("min_free_30d", ahead=True, in_region=False)
NODES_FULLEST_AHEAD_IN_REGION = _nodes_fullest("min_free_30d", ahead=True, in_region=True)

# Where `%(count)s` GPUs on one node fit from `%(t)s` (within FRESH of the summary's as_of)
# for `%(duration)s`, FITTING_AT's statement (rentals.sql.capacity) over the read model
# (`rentals.selectors.availability.start_windows`' first ask, shown "as of"): a node with
# fewer than `count` GPUs free at as_of does not fit (the (gpu_model, free_now) index leaves
# it unread); one with all its GPUs free over the whole horizon fits with all of them (the
# caller checks that the window ends within it); only the nodes between have their holdings
# in the window read, exactly. (Its fewest free over the horizon is no answer: `count` free
# at every instant need not be the same GPUs throughout.) At 10k GPUs, for one GPU on a
# node of the benchmark's model that reads about 100 of its 443 nodes, for a whole node 7.
_KEPT_NODES_FITTING = SQL(
    """    SELECT n.id, n.hostname, n.region_id, n.gpu_count AS gpus, '' AS grp,
           c.min_free_30d = n.gpu_count AS free_throughout
    FROM rentals_capacitynode c
    JOIN catalog_node n ON n.id = c.node_id
    WHERE c.gpu_model_id = %(model)s AND c.free_now >= %(count)s
      AND n.state = %(active)s AND n.gpu_count > 0 {region} AND {stack}"""
)
_NOT_FREE_THROUGHOUT = SQL("SELECT id FROM nodes WHERE NOT free_throughout")
FITTING_NOW_KEPT = fitting_at(
    nodes=_KEPT_NODES_FITTING.format(region=SQL(""), stack=stack_meets("n")),
    held_nodes=_NOT_FREE_THROUGHOUT,
).as_string()
FITTING_NOW_KEPT_IN_REGION = fitting_at(
    nodes=_KEPT_NODES_FITTING.format(
        region=SQL("AND n.region_id = %(region)s"), stack=stack_meets("n")
    ),
    held_nodes=_NOT_FREE_THROUGHOUT,
).as_string()

# The catalog's GPUs free now per model (`rentals.selectors.summary.capacity_free_now`), of
# the models in `%(models)s` whose summary is fresh since `%(fresh)s`: the sum of its
# counted nodes' free_now (CapacityNode, the (gpu_model, free_now) index alone), as of its
# summary's `as_of`.
FREE_NOW = """
SELECT s.gpu_model_id, s.as_of,
       coalesce((SELECT sum(c.free_now) FROM rentals_capacitynode c
                 WHERE c.gpu_model_id = s.gpu_model_id), 0)::int
FROM rentals_capacitysummary s
WHERE s.gpu_model_id = ANY(%(models)s) AND s.as_of >= %(fresh)s
"""
