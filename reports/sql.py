"""The fleet report's statements (`reports.selectors`, `reports.services`). They read rentals'
and telemetry's tables and the catalog's, and write the report's own closed steps."""

from functools import cache

from django.contrib.auth import get_user_model
from psycopg.sql import SQL, Identifier

from rentals.sql.holdings import held_day_span

# Per step, the holdings of allocations that overlap it, as a sweep: each holding is read
# once (the live ones that end after the first step, by rentals_ag_live_ends) and becomes
# the number of the first step it touches and of the first step after its end (step numbers
# in double precision from the first step, `date_part`: no date_trunc or numeric per row);
# holdings are counted per pair of numbers, each pair in at its first and out at its second,
# and a running sum over the steps gives each step's count. (Spreading every holding over
# its steps grew with holdings × steps.) Steps without any still come back, with 0.
ALLOCATED_PER_STEP = """
WITH first AS (
    SELECT date_trunc(%(unit)s, %(start)s::timestamptz) AS at,
           date_part('epoch', %(step)s::interval) AS seconds
), spans AS (
    SELECT greatest(floor(date_part('epoch', ag.starts_at - first.at) / first.seconds),
                    0)::int AS i0,
           ceil(date_part('epoch', ag.ends_at - first.at) / first.seconds)::int AS i1,
           count(*) AS n
    FROM first, rentals_allocationgpu ag
    WHERE NOT ag.released AND ag.ends_at > first.at AND ag.allocation_id IS NOT NULL
      AND ag.starts_at < %(end)s::timestamptz + %(step)s::interval
    GROUP BY 1, 2
), moves AS (
    SELECT i, sum(n) AS n
    FROM (SELECT i0 AS i, n FROM spans UNION ALL SELECT i1, -n FROM spans) AS m
    GROUP BY i
)
SELECT first.at + k * %(step)s::interval,
       (sum(coalesce(moves.n, 0)) OVER (ORDER BY k))::bigint
FROM first
CROSS JOIN generate_series(
    0, floor(date_part('epoch', %(end)s::timestamptz - first.at) / first.seconds)::int) AS k
LEFT JOIN moves ON moves.i = k
ORDER BY k
"""

# The same count written once for each closed step from `start` (a step's start) to `end`
# (the last step's start), for `reports.services.allocated_steps_close`. A step already
# written keeps its row: two runs at once write it once, and its count is final.
ALLOCATED_STEPS_CLOSE = (
    SQL(
        """
INSERT INTO rentals_allocatedstep (bucket, at, gpus)
SELECT %(unit)s, steps.at, steps.n FROM ({per_step}) AS steps (at, n)
ON CONFLICT (bucket, at) DO NOTHING
"""
    )
    .format(per_step=SQL(ALLOCATED_PER_STEP))
    .as_string()
)

# The ledger's rows of the days from `start` to `end` (whole days), summed per day, kind,
# currency and period, for the days `allocated_steps_close` closes in the same transaction.
LEDGER_DAYS_CLOSE = """
INSERT INTO rentals_ledgerday (at, kind, currency, period_id, net, entries)
SELECT date_trunc(%(unit)s, l.at), l.kind, l.currency, l.period_id, sum(l.net), count(*)
FROM rentals_ledgerentry l
WHERE l.at >= %(start)s AND l.at < %(end)s
GROUP BY 1, 2, 3, 4
ON CONFLICT (at, kind, currency, period_id) DO NOTHING
"""

# Forget this transaction's copy of the sessions' activity (taken at its first read of
# pg_stat_activity), so STEPS_HORIZON sees them as they are now.
ACTIVITY_FRESH = "SELECT pg_stat_clear_snapshot()"

# Up to when every step is closed for good: `now`, or the start of the oldest transaction
# open on this database (another session's), whichever is earlier. A write's holdings start
# no earlier than its own statement's clock (`core.db.db_now`, inside its transaction), so a
# booking not yet committed adds only to steps from its transaction's start on; an idle
# session's open transaction holds the horizon back until it ends. A session of another role
# whose activity this role may not see (without pg_read_all_stats) could be anywhere in a
# transaction: while one is connected there is no horizon (NULL), and nothing closes. Such a
# row shows its database and role but not its kind (a background process has no role).
STEPS_HORIZON = """
SELECT CASE WHEN bool_or(query = '<insufficient privilege>') THEN NULL
            ELSE least(%(now)s::timestamptz, min(xact_start)) END
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND usesysid IS NOT NULL
  AND coalesce(backend_type, 'client backend') = 'client backend'
"""

# What each model has booked on each of the 30 days from `day0`, as a step function over
# the days, so every live holding in the window is read once (by their index
# rentals_ag_live_ends), not once per day it touches. An allocation's holdings share their
# node and span, so they are counted per (node, span) first, from the index alone, and the
# day arithmetic runs once per group, not once per GPU. Clipped to the window, at whole
# microseconds s..e from `day0` (`date_part`'s double precision holds a month's microseconds
# exactly; integers from there on, not numeric per row; `day_us` is a day's), a holding
# covers part of its first day i0 (all it holds, when it ends that day), part of its last
# day i1 and the days between whole; holdings are counted per model and (i0, i1) with the
# microseconds they hold on each of the two days, and `reports.selectors.held_ahead` runs
# the sum over the days. The model is the holding's node's (an allocation's GPUs are its
# model's; the index carries the node, rentals 0028), by a hash join on the nodes rather
# than a look-up per allocation. From the same pass: `held_now` counts those of each group
# held at `now` (a moment of the first day), the report's "allocated now", and `held_open`
# those held in [open_start, open_end) (a step of the first day: the chart's open one).
BOOKED_AHEAD = (
    SQL(
        """
WITH held AS (
    SELECT ag.node_id, ag.starts_at, ag.ends_at, count(*) AS n
    FROM rentals_allocationgpu ag
    WHERE NOT ag.released AND ag.allocation_id IS NOT NULL
      AND ag.ends_at > %(day0)s AND ag.starts_at < %(day_n)s
    GROUP BY ag.node_id, ag.starts_at, ag.ends_at
), spans AS (
    SELECT n.gpu_model_id AS model, held.n, x.s, x.e, x.i0, x.i1,
           held.starts_at <= %(now)s AND held.ends_at > %(now)s AS held_now,
           held.starts_at < %(open_end)s AND held.ends_at > %(open_start)s AS held_open
    FROM held
    JOIN catalog_node n ON n.id = held.node_id
    {day_span}
)
SELECT model, i0, i1, sum(n * (least(e, (i0 + 1) * %(day_us)s) - s)) AS first_day_us,
       sum(n * (e - i1 * %(day_us)s)) AS last_day_us, sum(n)::bigint AS holdings,
       coalesce(sum(n) FILTER (WHERE held_now), 0)::bigint AS held_now,
       coalesce(sum(n) FILTER (WHERE held_open), 0)::bigint AS held_open
FROM spans
GROUP BY model, i0, i1
"""
    )
    .format(day_span=held_day_span(Identifier("held")))
    .as_string()
)

# BOOKED_AHEAD's `held_now` and `held_open` alone, where the days come from the capacity read
# model (rentals.models.BookedAheadDay): the allocations' live holdings at `now` and in
# [open_start, open_end), counted without the days' arithmetic.
HELD_NOW_AND_OPEN = """
SELECT coalesce(sum(1) FILTER (WHERE ag.starts_at <= %(now)s AND ag.ends_at > %(now)s), 0),
       coalesce(sum(1) FILTER (WHERE ag.starts_at < %(open_end)s
                                 AND ag.ends_at > %(open_start)s), 0)
FROM rentals_allocationgpu ag
WHERE NOT ag.released AND ag.allocation_id IS NOT NULL
  AND ag.ends_at > least(%(now)s, %(open_start)s)
  AND ag.starts_at < greatest(%(now)s, %(open_end)s)
"""

# The page's top line in one statement (but GPUs allocated now, which BOOKED_AHEAD counts):
# GPUs in the fleet, GPU-hours paid but stopped within the range (each stop to the next event
# leaving "stopped" or the end of the paid period, whichever is first: an expiry leaves it
# when enforcement runs, after that end; clipped to the range), impaired
# GPU-hours within the range (the impaired spans' GPUs) and nodes per health.
FLEET_REPORT_NOW = """
SELECT (SELECT coalesce(sum(gpu_count), 0) FROM catalog_node WHERE state = %(active)s),
       (SELECT coalesce(sum(a.gpu_count * extract(epoch FROM
                    least(back.at, a.paid_until, %(now)s) - greatest(stop.at, %(start)s))),
                0) / 3600
        FROM rentals_allocation a
        JOIN rentals_allocationevent stop ON stop.allocation_id = a.id AND stop.to_state = %(stopped)s
        LEFT JOIN LATERAL (
            SELECT e.at FROM rentals_allocationevent e
            WHERE e.allocation_id = a.id AND e.from_state = %(stopped)s
              AND (e.at, e.id) > (stop.at, stop.id)
            ORDER BY e.at, e.id LIMIT 1
        ) AS back ON true
        -- stopped time ends by paid_until, so only allocations paid past the range's start
        -- count: found by time (the index on state and paid_until, a range per state that
        -- may have stopped), not among every allocation ever written
        WHERE a.state = ANY(%(stoppable)s) AND a.paid_until > %(start)s
          AND a.paid_from <= %(now)s
          AND least(back.at, a.paid_until, %(now)s) > greatest(stop.at, %(start)s)),
       (SELECT coalesce(sum(cardinality(s.gpus) * extract(epoch FROM
                    least(coalesce(s.ended_at, %(now)s), %(now)s) - greatest(s.started_at, %(start)s))),
                0) / 3600
        FROM rentals_impairedspan s  -- impaired GPU-hours within the range
        WHERE s.started_at < %(now)s AND coalesce(s.ended_at, %(now)s) > %(start)s
          -- a span shorter than IMPAIRED_MIN_SECONDS is not impaired time
          AND (s.ended_at IS NULL OR s.ended_at - s.started_at >= %(impaired_min)s)),
       (SELECT json_object_agg(health, n ORDER BY health)
        FROM (SELECT health, count(*) AS n FROM catalog_node WHERE state <> %(retired)s
              GROUP BY health) AS h)
"""

# Charges and refunds (`kinds`) per currency and rental period, net of VAT (VAT is not the
# provider's revenue), each row naming its allocation's period: the closed days from
# `kept_from` to `kept_until` as summed once (rentals_ledgerday), and the range's rows before
# and after them with what they sum from their index (rentals_ledger_at_period).
REVENUE = """
SELECT x.kind, x.currency, p.name_en AS period_en, p.name_pl AS period_pl,
       sum(x.net) AS amount, sum(x.entries)::bigint AS bookings
FROM (
    SELECT l.kind, l.currency, l.period_id, l.net, 1 AS entries
    FROM rentals_ledgerentry l
    WHERE l.at >= %(start)s AND l.at < %(kept_from)s AND l.kind = ANY(%(kinds)s)
    UNION ALL
    SELECT d.kind, d.currency, d.period_id, d.net, d.entries
    FROM rentals_ledgerday d
    WHERE d.at >= %(kept_from)s AND d.at < %(kept_until)s AND d.kind = ANY(%(kinds)s)
    UNION ALL
    SELECT l.kind, l.currency, l.period_id, l.net, 1
    FROM rentals_ledgerentry l
    WHERE l.at >= %(kept_until)s AND l.at < %(end)s AND l.kind = ANY(%(kinds)s)
) AS x
JOIN catalog_rentalperiod p ON p.id = x.period_id
GROUP BY x.kind, x.currency, p.id
ORDER BY x.currency, p.duration
"""

# Each active model's GPUs on its active nodes.
CAPACITY = """
SELECT m.id, m.slug, m.name, coalesce(sum(n.gpu_count), 0) AS capacity
FROM catalog_gpumodel m
LEFT JOIN catalog_node n ON n.gpu_model_id = m.id AND n.state = %(active)s
WHERE m.is_active
GROUP BY m.id
ORDER BY m.name
"""

# The names of models and regions by id, for the rollups' groups.
NAMES = """
SELECT 'model', id, name AS name_en, name AS name_pl FROM catalog_gpumodel
UNION ALL
SELECT 'region', id, name_en, name_pl FROM catalog_region
"""

# Nodes in service that are not healthy, as the list shows them.
# Nodes in service and their health, but those whose health is in `skip` (the page lists
# the troubled, the first `limit`; the CSV every node, with a NULL limit).
NODE_HEALTH = """
SELECT n.hostname, n.health, n.health_detail, n.last_good_poll_at, r.name_en AS region_en,
       r.name_pl AS region_pl, m.name AS model
FROM catalog_node n
JOIN catalog_region r ON r.id = n.region_id
JOIN catalog_gpumodel m ON m.id = n.gpu_model_id
WHERE n.state <> %(retired)s AND n.health <> ALL(%(skip)s)
ORDER BY n.hostname
LIMIT %(limit)s
"""

# Allocations as the fleet report's lists show them; `{where}` picks and orders them.
_ALLOCATIONS = SQL(
    """
SELECT a.id, a.gpu_count, a.state, a.paid_until, m.slug AS model_slug, m.name AS model,
       u.username AS owner, n.hostname AS node
FROM rentals_allocation a
JOIN catalog_gpumodel m ON m.id = a.gpu_model_id
JOIN catalog_node n ON n.id = a.node_id
JOIN {users} u ON u.id = a.user_id
WHERE {where}
ORDER BY a.paid_until
LIMIT %(limit)s
"""
)

_ALLOCATIONS_WHERE = {
    # Live and paid until before `soon`.
    "expiring": SQL("a.state = ANY(%(started)s) AND a.paid_until <= %(soon)s"),
    # Running since before `since`, and none of its GPUs over the active threshold in any
    # minute rolled up since then: one row per GPU (telemetry_gpubusy, kept by the minute
    # rollup), not each GPU's minutes. OFFSET 0 keeps the check a probe per allocation, read
    # in paid_until order and stopping at the limit; flattened into an anti-join, it hashed
    # every holding ever written joined with every GPU's busy row (24 → 8.5 ms at 10k GPUs).
    "idle": SQL(
        """
a.state = %(running)s AND a.paid_from <= %(since)s AND NOT EXISTS (
    SELECT 1 FROM rentals_allocationgpu ag
    JOIN telemetry_gpubusy b ON b.gpu_id = ag.gpu_id
    WHERE ag.allocation_id = a.id AND b.at >= %(since)s
    OFFSET 0)
"""
    ),
}


@cache
def allocation_rows(which: str) -> str:
    """The fleet report's list of `which` allocations ("expiring" or "idle"). Rendered on first
    use: the users' table is the user model's, known once the apps are loaded."""
    users = Identifier(get_user_model()._meta.db_table)
    return _ALLOCATIONS.format(users=users, where=_ALLOCATIONS_WHERE[which]).as_string()
