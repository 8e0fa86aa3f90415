"""Rentals' hand-written SQL, in one place: capacity (availability and placement), the
booking's write, enforcement, idempotency, the catalog cache's clock and the staff
dashboard.

A statement with a variable part is composed with `psycopg.sql` (`SQL(...).format(...)`,
`Identifier` for a table's name) and rendered to plain text once, at import or in a cached
function, so Django's query log and `CaptureQueriesContext` see the text that runs. Enum
words are parameters (`%(active)s`, `= ANY(%(states)s)`), never quoted in the text: the
callers pass `NodeState.ACTIVE`, `AllocationState.RUNNING`, `LedgerKind.CHARGE`.

"Does this holding take its GPU in this window" is one clause, `holding_overlaps`; a GPU's
`gpu_held` and `gpu_free`, the count `gpus_held_per_node` and the availability calendar
are written with it, and `rentals.selectors.holdings_overlapping` is the same rule for the ORM.
`FITTING_SPANS` alone states it the other way round, as the gaps between a GPU's holdings
(a sweep cannot ask it per instant); tests/rentals/test_clusters.py holds it to FITTING_AT.
"""

from functools import cache

from django.contrib.auth import get_user_model
from psycopg.sql import SQL, Composable, Composed, Identifier, Placeholder


def holding_overlaps(*, starts: Composable, ends: Composable) -> Composed:
    """The holding `ag` is live (unreleased) and overlaps [starts, ends): the rule the
    exclusion constraint `rentals_allocationgpu_no_overlap` guards, as a clause.
    `rentals.selectors.holdings_overlapping` says the same for the ORM."""
    return SQL("NOT ag.released AND ag.starts_at < {ends} AND ag.ends_at > {starts}").format(
        starts=starts, ends=ends
    )


def gpu_held(gpu: Composable, *, starts: Composable, ends: Composable) -> Composed:
    """Some live holding of `gpu` overlaps [starts, ends)."""
    return SQL(
        """EXISTS (
      SELECT 1 FROM rentals_allocationgpu ag
      WHERE ag.gpu_id = {gpu} AND {overlaps})"""
    ).format(gpu=gpu, overlaps=holding_overlaps(starts=starts, ends=ends))


def gpu_free(gpu: Composable, *, starts: Composable, ends: Composable) -> Composed:
    """`gpu` is free for [starts, ends): no live holding of it overlaps the window."""
    return SQL("NOT {}").format(gpu_held(gpu, starts=starts, ends=ends))


def gpus_held_per_node(*, node_ids: Composable, starts: Composable, ends: Composable) -> Composed:
    """Per node of `node_ids` (a query of node ids), how many of its GPUs some live holding
    overlaps [starts, ends) for, each GPU once: `gpu_held`'s rule counted for many GPUs at
    once, from the live holdings' index alone (`rentals_ag_live_ends` carries each
    holding's node, rentals 0028), with no GPU row read."""
    return SQL(
        """SELECT ag.node_id, count(DISTINCT ag.gpu_id) AS gpus
    FROM rentals_allocationgpu ag
    WHERE ag.node_id IN ({node_ids}) AND {overlaps}
    GROUP BY ag.node_id"""
    ).format(node_ids=node_ids, overlaps=holding_overlaps(starts=starts, ends=ends))


_G_ID = Identifier("g", "id")
_WINDOW = {"starts": Placeholder("starts_at"), "ends": Placeholder("ends_at")}


# --- Availability and placement ----------------------------------------------------------


# Per active node of the model, how many of its GPUs no live holding holds in the period,
# where that is at least `count`: placement's candidates. `region` (an id, or NULL for any
# region) narrows the nodes: a literal NULL is folded away when the statement is planned, so
# one text serves both. A node's free GPUs are its GPU count (Node.gpu_count) less those
# held, counted per node from the live holdings (`gpus_held_per_node`): no GPU row is read.
# A node's software stack meets a booking's minimum versions (`requires_driver`,
# `requires_cuda`, `requires_rocm`: catalog.software.Requires.params, each an integer array
# or NULL for no minimum). The keys are version parts as integers (catalog 0014), which
# PostgreSQL orders part by part: 12.10 > 12.9. A node whose version is unknown (NULL key)
# meets no minimum. Like `region`, a NULL parameter is folded away when planned.
def stack_meets(node: str) -> Composed:
    n = Identifier(node)
    return SQL(
        """(%(min_driver)s::int[] IS NULL OR {n}.driver_key >= %(min_driver)s::int[])
  AND (%(min_cuda)s::int[] IS NULL OR {n}.cuda_key >= %(min_cuda)s::int[])
  AND (%(min_rocm)s::int[] IS NULL OR {n}.rocm_key >= %(min_rocm)s::int[])"""
    ).format(n=n)


_MODEL_NODES = SQL("""m.gpu_model_id = %(model)s AND m.state = %(active)s
  AND (%(region)s::bigint IS NULL OR m.region_id = %(region)s) AND {stack}""").format(
    stack=stack_meets("m")
)
_ROOM = SQL(
    """
SELECT m.id AS node_id, m.gpu_count - coalesce(held.gpus, 0) AS free
FROM catalog_node m
LEFT JOIN ({held}) AS held ON held.node_id = m.id
WHERE {model_nodes} AND m.gpu_count - coalesce(held.gpus, 0) >= %(count)s
"""
).format(
    model_nodes=_MODEL_NODES,
    held=gpus_held_per_node(
        node_ids=SQL("SELECT m.id FROM catalog_node m WHERE {}").format(_MODEL_NODES), **_WINDOW
    ),
)

# The nodes with room, fullest first (packing keeps whole nodes free for whole-node bookings).
ROOM_NODES = (
    SQL("SELECT node_id FROM ({}) AS room ORDER BY free, node_id").format(_ROOM).as_string()
)

# Whether some node has room: a yes or no, not the candidate list (every quote and every
# estimate asks). Node after node, each node's live holdings counted from its own index
# (`rentals_ag_node_live`), so the first node with room ends the read: most often at once,
# where counting every node's holdings (`_ROOM`) reads the model's whole book.
ROOM_EXISTS = (
    SQL(
        """
SELECT EXISTS (
    SELECT 1 FROM catalog_node m
    WHERE {model_nodes} AND m.gpu_count >= %(count)s
      AND m.gpu_count - (
          SELECT count(DISTINCT ag.gpu_id) FROM rentals_allocationgpu ag
          WHERE ag.node_id = m.id AND {overlaps}) >= %(count)s)
"""
    )
    .format(model_nodes=_MODEL_NODES, overlaps=holding_overlaps(**_WINDOW))
    .as_string()
)

# The free GPUs of nodes already chosen (and locked) for the model: plain SQL, as this runs
# inside every booking's transaction and the ORM's query building cost more than the query.
FREE_ON_NODES = (
    SQL(
        """
SELECT g.id, g.node_id, g.index, g.uuid FROM catalog_gpu g
WHERE g.node_id = ANY(%(nodes)s)
  AND {free}
ORDER BY g.node_id, g.index
"""
    )
    .format(free=gpu_free(_G_ID, **_WINDOW))
    .as_string()
)

# The fullest node with room that no other booking holds right now, its row locked, with its
# region (`rentals.placement.place_locked`).
PLACE = (
    SQL(
        """
WITH room AS MATERIALIZED (  -- once, whatever plan the join below gets
{room}
)
SELECT n.*, r.slug AS region_slug, r.name_en AS region_name_en, r.name_pl AS region_name_pl
FROM (SELECT node_id, free FROM room ORDER BY free, node_id) AS fullest_first
JOIN LATERAL (
    -- a primary-key lookup per candidate, in order, until one is not held by another booking
    SELECT * FROM catalog_node c
    WHERE c.id = fullest_first.node_id AND c.state = %(active)s AND {stack}
) n ON true
JOIN catalog_region r ON r.id = n.region_id  -- the booking's answer names it
ORDER BY fullest_first.free, fullest_first.node_id
LIMIT 1
FOR UPDATE OF n SKIP LOCKED
"""
    )
    .format(room=_ROOM, stack=stack_meets("c"))
    .as_string()
)

# Network groups with at least `nodes` whole nodes of `per_node` GPUs none of whose GPUs is
# held in the window: the fewest such nodes first (least fragmentation). `region` as in _ROOM.
WHOLE_FREE_GROUPS = (
    SQL(
        """
SELECT n.network_group, array_agg(n.id ORDER BY n.id), array_agg(n.gpu_count ORDER BY n.id)
FROM catalog_node n
WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s AND n.network_group <> ''
  AND n.gpu_count = %(per_node)s
  AND (%(region)s::bigint IS NULL OR n.region_id = %(region)s) AND {stack}
  AND NOT EXISTS (
      SELECT 1 FROM catalog_gpu g
      WHERE g.node_id = n.id AND {held})
GROUP BY n.network_group
HAVING count(*) >= %(nodes)s
ORDER BY count(*), n.network_group
"""
    )
    .format(held=gpu_held(_G_ID, **_WINDOW), stack=stack_meets("n"))
    .as_string()
)

_IN_REGION = SQL("AND n.region_id = %(region)s")

# Per day from `first` (`days` of them): the most GPUs free on one node for the whole day,
# the whole nodes free, and the GPUs free in all (today counts from `now`); `{region}`
# narrows the nodes. A GPU is busy on a day when some live holding of it overlaps the day
# (from `now`, for today): the rule `gpu_held` states, per day. Read from the holdings
# themselves, each once, not from every day times every holding (nor every node times every
# day), found by the node each carries (no GPU row is read): each holding on the calendar
# becomes the days it touches [ks, ke] (from the day after, where a GPU's next holding starts
# on the day its previous one ends, so a GPU counts once a day: one GPU's live holdings never
# overlap), each node's busy count a step function over the days (+1 from a holding's first
# day, -1 after its last), and the nodes a count per (GPUs, busy) bucket per day, from which
# each day's three figures follow. Day indexes are reckoned in double precision
# (`date_part`), not numeric (`extract`): exact to the microsecond over such spans, at a
# fraction of the cost per holding.
_FREE_BY_DAY = SQL(
    """
WITH nodes AS MATERIALIZED (
    SELECT n.id, n.gpu_count AS gpus  -- the node's GPU rows, counted by the database
    FROM catalog_node n
    WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s AND n.gpu_count > 0 {region}
      AND {stack}
), spans AS (
    SELECT ag.node_id, ag.gpu_id, ag.starts_at,
           greatest(floor(date_part('epoch', ag.starts_at - %(first)s::timestamptz) / 86400),
                    0)::int AS ks,
           least(ceil(date_part('epoch', ag.ends_at - %(first)s::timestamptz) / 86400) - 1,
                 %(days)s - 1)::int AS ke
    FROM rentals_allocationgpu ag
    WHERE ag.node_id IN (SELECT id FROM nodes) AND {overlaps}
), holding AS (
    -- a GPU counts once a day: its next holding, when it starts on the day the one before
    -- ends, counts from the day after
    SELECT node_id, ke,
           CASE WHEN ks = lag(ke) OVER (PARTITION BY gpu_id ORDER BY starts_at) THEN ks + 1
                ELSE ks END AS ks
    FROM spans
), node_day AS (
    SELECT node_id, k, sum(delta) AS delta
    FROM (
        SELECT node_id, ks AS k, 1 AS delta FROM holding WHERE ks <= ke
        UNION ALL
        SELECT node_id, ke + 1, -1 FROM holding WHERE ks <= ke AND ke + 1 < %(days)s
    ) AS e
    GROUP BY node_id, k
), node_busy AS (
    SELECT node_id, k, sum(delta) OVER (PARTITION BY node_id ORDER BY k) AS busy
    FROM node_day
), moves AS (
    -- a node's busy count changes on day k: it leaves one bucket for another
    SELECT b.k, nodes.gpus, b.busy,
           lag(b.busy, 1, 0::numeric) OVER (PARTITION BY b.node_id ORDER BY b.k) AS before
    FROM node_busy b JOIN nodes ON nodes.id = b.node_id
), bucket_day AS (
    SELECT k, gpus, busy, sum(delta) AS delta
    FROM (
        SELECT 0 AS k, gpus, 0::numeric AS busy, count(*) AS delta FROM nodes GROUP BY gpus
        UNION ALL SELECT k, gpus, before, -1 FROM moves WHERE before <> busy
        UNION ALL SELECT k, gpus, busy, 1 FROM moves WHERE before <> busy
    ) AS changes
    GROUP BY k, gpus, busy
), grid AS (
    SELECT days.k, b.gpus, b.busy,
           sum(coalesce(bucket_day.delta, 0)) OVER (
               PARTITION BY b.gpus, b.busy ORDER BY days.k) AS nodes
    FROM generate_series(0, %(days)s - 1) AS days (k)
    CROSS JOIN (SELECT DISTINCT gpus, busy FROM bucket_day) AS b
    LEFT JOIN bucket_day
      ON bucket_day.k = days.k AND bucket_day.gpus = b.gpus AND bucket_day.busy = b.busy
)
SELECT %(first)s::timestamptz + k * interval '1 day',
       coalesce(max(gpus - busy) FILTER (WHERE nodes > 0), 0)::int,
       coalesce(sum(nodes) FILTER (WHERE busy = 0), 0)::int,
       coalesce(sum(nodes * (gpus - busy)), 0)::int
FROM grid
GROUP BY k ORDER BY k
"""
)
_CALENDAR_HOLDINGS = holding_overlaps(
    starts=SQL("%(now)s::timestamptz"),
    ends=SQL("%(first)s::timestamptz + %(days)s * interval '1 day'"),
)
_STACK_N = stack_meets("n")
FREE_BY_DAY = _FREE_BY_DAY.format(
    region=SQL(""), overlaps=_CALENDAR_HOLDINGS, stack=_STACK_N
).as_string()
FREE_BY_DAY_IN_REGION = _FREE_BY_DAY.format(
    region=_IN_REGION, overlaps=_CALENDAR_HOLDINGS, stack=_STACK_N
).as_string()

# The instants at which capacity can free up: `not_before` and the next `limit` ends of
# the model's holdings.
START_CANDIDATES = """
SELECT %(not_before)s::timestamptz AS t
UNION
(SELECT DISTINCT ag.ends_at FROM rentals_allocationgpu ag
 JOIN catalog_node n ON n.id = ag.node_id  -- the holding's own node (rentals 0028)
 WHERE n.gpu_model_id = %(model)s AND NOT ag.released AND ag.ends_at > %(not_before)s
 ORDER BY ag.ends_at LIMIT %(limit)s)
ORDER BY t
"""

# (region, network group, hostnames) where the request fits from `t` for `duration`: GPUs
# on one node, or (`whole`) `nodes` whole nodes of one network group, fewest first. A node's
# free GPUs are its GPU count (Node.gpu_count) less those held in the window, counted per
# node from the live holdings (`gpus_held_per_node`): no GPU row is read, and only the
# model's nodes' holdings are counted.
_FITTING_AT = SQL(
    """
WITH nodes AS MATERIALIZED (
    SELECT n.id, n.hostname, n.region_id, n.gpu_count AS gpus,
           CASE WHEN %(whole)s THEN n.network_group ELSE '' END AS grp
    FROM catalog_node n
    WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s AND n.gpu_count > 0 {region}
      AND (NOT %(whole)s OR n.network_group <> '') AND {stack}
), held AS (
{held}
), free AS (
    SELECT nodes.hostname, r.slug AS region, nodes.grp, nodes.gpus,
           nodes.gpus - coalesce(held.gpus, 0) AS free
    FROM nodes
    JOIN catalog_region r ON r.id = nodes.region_id
    LEFT JOIN held ON held.node_id = nodes.id
)
SELECT region, grp, array_agg(hostname ORDER BY free, hostname)
FROM free
WHERE free >= %(count)s AND (NOT %(whole)s OR free = gpus AND gpus = %(per_node)s)
GROUP BY region, grp
HAVING count(*) >= %(nodes)s
ORDER BY count(*), region, grp
"""
)
_FITTING_HELD = gpus_held_per_node(
    node_ids=SQL("SELECT id FROM nodes"),
    starts=Placeholder("t"),
    ends=SQL("{}::timestamptz + {}").format(Placeholder("t"), Placeholder("duration")),
)
FITTING_AT = _FITTING_AT.format(held=_FITTING_HELD, region=SQL(""), stack=_STACK_N).as_string()
FITTING_AT_IN_REGION = _FITTING_AT.format(
    held=_FITTING_HELD, region=_IN_REGION, stack=_STACK_N
).as_string()

# The spans of start instants ≥ `not_before` at which the request fits for `duration`,
# [from, until] (until NULL: open-ended), in time order; none: it never fits, as the holdings
# stand. The request is `count` GPUs on one node, or (`whole`) `nodes` whole nodes of
# `per_node` GPUs in one network group. One read, rather than FITTING_AT at every candidate
# instant (hundreds of them, each reading the live holdings, when the request fits nowhere
# soon). The unit is a GPU (a node's whole, for whole nodes): each unit's live holdings from
# `not_before` on leave gaps (from the end of all before to the next start; the last one
# open-ended, and a unit never held one gap from `not_before`), and a window
# [t, t + duration) finds the unit free exactly when t is in [gap start, gap end - duration]
# of one of its gaps. Per node (per network group, for whole nodes) the units whose interval
# holds t are counted by a sweep over the intervals' ends (a start before an end at the same
# instant: they are closed), and a span runs from where the count reaches enough to where it
# drops below. It is FITTING_AT's rule: the request fits at an instant exactly when some
# span holds it, so the start windows need ask only those instants.
_FITTING_SPANS = SQL(
    """
WITH nodes AS MATERIALIZED (
    SELECT n.id, n.region_id,
           CASE WHEN %(whole)s THEN n.network_group ELSE n.id::text END AS grp,
           CASE WHEN %(whole)s THEN 1 ELSE n.gpu_count END AS units
    FROM catalog_node n
    WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s {region} AND {stack}
      AND CASE WHEN %(whole)s THEN n.network_group <> '' AND n.gpu_count = %(per_node)s
               ELSE n.gpu_count >= %(count)s END
), busy AS (
    SELECT ag.node_id, x.unit, greatest(ag.starts_at, %(not_before)s) AS s, ag.ends_at AS e,
           max(ag.ends_at) OVER (PARTITION BY x.unit ORDER BY ag.starts_at, ag.ends_at
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM rentals_allocationgpu ag
    CROSS JOIN LATERAL (
        SELECT CASE WHEN %(whole)s THEN ag.node_id ELSE ag.gpu_id END AS unit) AS x
    WHERE ag.node_id IN (SELECT id FROM nodes) AND NOT ag.released
      AND ag.ends_at > %(not_before)s
), gaps AS (
    SELECT node_id, coalesce(before, %(not_before)s) AS gs, s AS ge, 1 AS units
    FROM busy WHERE s > coalesce(before, %(not_before)s)
    UNION ALL
    SELECT node_id, max(e), 'infinity', 1 FROM busy GROUP BY node_id, unit
    UNION ALL
    SELECT nodes.id, %(not_before)s, 'infinity', nodes.units - coalesce(b.held, 0)
    FROM nodes
    LEFT JOIN (SELECT node_id, count(DISTINCT unit) AS held FROM busy GROUP BY node_id) AS b
      ON b.node_id = nodes.id
), fits AS (
    SELECT nodes.region_id, nodes.grp, gaps.units, gaps.gs AS t0,
           gaps.ge - %(duration)s AS t1
    FROM gaps JOIN nodes ON nodes.id = gaps.node_id
    WHERE gaps.units > 0 AND gaps.gs <= gaps.ge - %(duration)s
), sweep AS (
    SELECT region_id, grp, at, sum(delta * units) OVER w AS free, row_number() OVER w AS i
    FROM (SELECT region_id, grp, units, t0 AS at, 1 AS delta FROM fits
          UNION ALL
          SELECT region_id, grp, units, t1, -1 FROM fits WHERE t1 < 'infinity') AS e
    WINDOW w AS (PARTITION BY region_id, grp ORDER BY at, delta DESC ROWS UNBOUNDED PRECEDING)
), enough AS (
    SELECT region_id, grp, at, i,
           free >= CASE WHEN %(whole)s THEN %(nodes)s ELSE %(count)s END AS fits
    FROM sweep
), turns AS (  -- where a group's count reaches enough, or drops below it
    SELECT region_id, grp, at, i, fits
    FROM (SELECT *, coalesce(lag(fits) OVER (PARTITION BY region_id, grp ORDER BY i), false)
                    AS fitted
          FROM enough) AS e
    WHERE fits <> fitted
), spans AS (
    SELECT at, fits, lead(at) OVER (PARTITION BY region_id, grp ORDER BY i) AS until
    FROM turns
)
SELECT at, until FROM spans WHERE fits ORDER BY at
"""
)
FITTING_SPANS = _FITTING_SPANS.format(region=SQL(""), stack=_STACK_N).as_string()
FITTING_SPANS_IN_REGION = _FITTING_SPANS.format(region=_IN_REGION, stack=_STACK_N).as_string()


# --- Booking, enforcement, idempotency ----------------------------------------------------

# Everything a booking writes, in one statement: one allocation per node, the GPUs each
# holds for the paid period (under the exclusion constraint), the charge (on the first
# allocation: the quote's gross, with its net and VAT), a "booked" event per allocation and
# the receipt. Foreign keys between
# these rows are checked at the end of the statement, when all of them are there.
BOOKING_WRITE = """
WITH allocation AS (
    INSERT INTO rentals_allocation (id, team_id, user_id, quote_id, cluster_id, gpu_model_id,
        node_id, gpu_count, period_id, paid_from, paid_until, state, created_at,
        vcpus_per_gpu, ram_gib_per_gpu)
    SELECT a.id, %(team)s, %(user)s, %(quote)s, %(cluster)s, %(model)s, a.node_id, a.gpus,
           %(period)s, %(paid_from)s, %(paid_until)s, %(state)s, %(created_at)s,
           %(vcpus_per_gpu)s, %(ram_gib_per_gpu)s
    FROM unnest(%(allocations)s::uuid[], %(nodes)s::int[], %(gpu_counts)s::int[])
        AS a (id, node_id, gpus)
), holding AS (
    INSERT INTO rentals_allocationgpu (allocation_id, gpu_id, starts_at, ends_at, released)
    SELECT h.allocation_id, h.gpu_id, %(paid_from)s, %(paid_until)s, false
    FROM unnest(%(holders)s::uuid[], %(gpus)s::int[]) AS h (allocation_id, gpu_id)
    RETURNING gpu_id, id
), charge AS (
    INSERT INTO rentals_ledgerentry (team_id, user_id, allocation_id, period_id, kind, amount,
        net, vat, currency, quote_id, reason, period_count, at)
    VALUES (%(team)s, %(user)s, %(lead)s, %(period)s, %(charge)s, %(amount)s, %(net)s, %(vat)s,
            %(currency)s, %(quote)s, %(reason)s, %(period_count)s, %(now)s)
    RETURNING id
), event AS (
    INSERT INTO rentals_allocationevent (allocation_id, at, actor_id, kind, from_state,
        to_state, note)
    SELECT e.id, %(now)s, %(user)s, %(booked)s, '', %(state)s, ''
    FROM unnest(%(allocations)s::uuid[]) AS e (id)
    RETURNING allocation_id, id
), receipt AS (
    INSERT INTO rentals_notice (user_id, allocation_id, quote_id, endpoint_url, kind, ends_at,
        created_at, attempts, last_error)
    VALUES (%(user)s, %(lead)s, %(quote)s, '', %(receipt)s, %(paid_until)s, %(now)s, 0, '')
    RETURNING id
)
SELECT (SELECT json_object_agg(gpu_id, id) FROM holding),
       (SELECT json_object_agg(allocation_id, id) FROM event),
       (SELECT id FROM receipt),
       (SELECT id FROM charge)
"""

# One transition by time: the allocations in `from` states whose `{condition}` holds move to
# `to` (rows another run holds are skipped), each with its event.
_ENFORCE = SQL(
    """
WITH moved AS (
    UPDATE rentals_allocation AS a SET state = %(to)s
    FROM (
        SELECT id, state FROM rentals_allocation
        WHERE state = ANY(%(from)s) AND {condition}
        FOR UPDATE SKIP LOCKED
    ) AS old
    WHERE a.id = old.id
    RETURNING a.id, old.state AS from_state
)
INSERT INTO rentals_allocationevent (allocation_id, at, kind, from_state, to_state, note)
SELECT id, %(now)s, %(kind)s, from_state, %(to)s, '' FROM moved
ORDER BY id
RETURNING id
"""
)
ENFORCE_EXPIRE = _ENFORCE.format(condition=SQL("paid_until <= %(now)s")).as_string()
ENFORCE_START = _ENFORCE.format(
    condition=SQL("paid_from <= %(now)s AND paid_until > %(now)s")
).as_string()

# The stored answer, the advisory lock that tells a concurrent duplicate apart (409)
# without blocking it, and the database's clock (core.db.db_now), in one statement. A first
# request that committed in the instant between this statement's snapshot and its lock is not
# seen here; its row then makes `IDEMPOTENCY_CLAIM` insert nothing, and the whole transaction
# runs again and replays it.
IDEMPOTENCY_LOOK_UP = """
SELECT pg_try_advisory_xact_lock(hashtextextended(%(lock)s, 0)), statement_timestamp(),
       k.id, k.fingerprint, k.created_at, k.status_code, k.content_type, k.location, k.body
FROM (VALUES (1)) AS one (x)
LEFT JOIN rentals_idempotencykey k ON k.team_id = %(team)s AND k.key = %(key)s
"""

# The answer the client saw, stored unless a first request's row is already there.
IDEMPOTENCY_CLAIM = """
INSERT INTO rentals_idempotencykey (team_id, user_id, key, fingerprint, status_code,
    content_type, location, body, created_at)
VALUES (%(team)s, %(user)s, %(key)s, %(fingerprint)s, %(status_code)s, %(content_type)s,
        %(location)s, %(body)s, %(created_at)s)
ON CONFLICT (team_id, key) DO NOTHING
RETURNING id
"""

# The next instant the catalog's figures change by time alone: a holding starting or
# ending, a scheduled price taking effect.
CATALOG_NEXT_CHANGE = """
SELECT least(
    (SELECT min(starts_at) FROM rentals_allocationgpu WHERE NOT released AND starts_at > %(now)s),
    (SELECT min(ends_at) FROM rentals_allocationgpu WHERE NOT released AND ends_at > %(now)s),
    (SELECT min(effective_from) FROM catalog_gpuprice WHERE effective_from > %(now)s)
)
"""


# --- Held now ------------------------------------------------------------------------------

# Per node, the GPUs live holdings hold at `now` ({holders}: all of them, or allocations'
# only), from the live holdings' index alone: it carries each holding's node (rentals 0028).
_HELD_NOW = SQL(
    """SELECT ag.node_id, count(*) AS n FROM rentals_allocationgpu ag
    WHERE {overlaps} {holders}
    GROUP BY ag.node_id"""
)
_NOW = {"starts": SQL("%(now)s::timestamptz"),
        "ends": SQL("%(now)s::timestamptz + interval '1 microsecond'")}  # fmt: skip
_HELD_NOW_ALL = _HELD_NOW.format(overlaps=holding_overlaps(**_NOW), holders=SQL(""))

# The catalog's GPUs free now per model: its active nodes' GPUs (Node.gpu_count) less those
# some holding (a booking's or a maintenance window's) holds now.
FREE_NOW = (
    SQL(
        """
WITH held AS ({held})
SELECT n.gpu_model_id, sum(n.gpu_count - coalesce(held.n, 0))::int
FROM catalog_node n
LEFT JOIN held ON held.node_id = n.id
WHERE n.state = %(active)s
GROUP BY n.gpu_model_id
"""
    )
    .format(held=_HELD_NOW_ALL)
    .as_string()
)

# GPUs that allocations hold now, per model and region (slugs), on nodes in any state.
ALLOCATED_NOW = (
    SQL(
        """
WITH held AS ({held})
SELECT m.slug, r.slug, sum(held.n)::int
FROM held
JOIN catalog_node n ON n.id = held.node_id
JOIN catalog_gpumodel m ON m.id = n.gpu_model_id
JOIN catalog_region r ON r.id = n.region_id
GROUP BY m.slug, r.slug
"""
    )
    .format(
        held=_HELD_NOW.format(
            overlaps=holding_overlaps(**_NOW), holders=SQL("AND ag.allocation_id IS NOT NULL")
        )
    )
    .as_string()
)


# --- The staff dashboard -----------------------------------------------------------------

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
# (the last step's start), for `rentals.services.usage.allocated_steps_close`. A step already
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
# microseconds they hold on each of the two days, and `rentals.dashboard.booked_ahead` runs
# the sum over the days. The model is the holding's node's (an allocation's GPUs are its
# model's; the index carries the node, rentals 0028), by a hash join on the nodes rather
# than a look-up per allocation. From the same pass: `held_now` counts those of each group
# held at `now` (a moment of the first day), the dashboard's "allocated now", and `held_open`
# those held in [open_start, open_end) (a step of the first day: the chart's open one).
BOOKED_AHEAD = """
WITH held AS (
    SELECT ag.node_id, ag.starts_at, ag.ends_at, count(*) AS n
    FROM rentals_allocationgpu ag
    WHERE NOT ag.released AND ag.allocation_id IS NOT NULL
      AND ag.ends_at > %(day0)s AND ag.starts_at < %(day_n)s
    GROUP BY ag.node_id, ag.starts_at, ag.ends_at
), spans AS (
    SELECT n.gpu_model_id AS model, held.n, x.s, x.e,
           (x.s / %(day_us)s)::int AS i0, ((x.e + %(day_us)s - 1) / %(day_us)s)::int - 1 AS i1,
           held.starts_at <= %(now)s AND held.ends_at > %(now)s AS held_now,
           held.starts_at < %(open_end)s AND held.ends_at > %(open_start)s AS held_open
    FROM held
    JOIN catalog_node n ON n.id = held.node_id
    CROSS JOIN LATERAL (SELECT
        round(date_part('epoch', greatest(held.starts_at, %(day0)s) - %(day0)s) * 1e6)::bigint
            AS s,
        round(date_part('epoch', least(held.ends_at, %(day_n)s) - %(day0)s) * 1e6)::bigint
            AS e) AS x
)
SELECT model, i0, i1, sum(n * (least(e, (i0 + 1) * %(day_us)s) - s)) AS first_day_us,
       sum(n * (e - i1 * %(day_us)s)) AS last_day_us, sum(n)::bigint AS holdings,
       coalesce(sum(n) FILTER (WHERE held_now), 0)::bigint AS held_now,
       coalesce(sum(n) FILTER (WHERE held_open), 0)::bigint AS held_open
FROM spans
GROUP BY model, i0, i1
"""

# The page's top line in one statement (but GPUs allocated now, which BOOKED_AHEAD counts):
# GPUs in the fleet, GPU-hours paid but stopped within the range (each stop to the next event
# leaving "stopped" or the end of the paid period, whichever is first: an expiry leaves it
# when enforcement runs, after that end; clipped to the range), impaired
# GPU-hours within the range (the impaired spans' GPUs) and nodes per health.
DASHBOARD_NOW = """
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
        WHERE (a.state = ANY(%(started)s) OR a.paid_until >= %(start)s)
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

# Allocations as the dashboard's lists show them; `{where}` picks and orders them.
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
    # rollup), not each GPU's minutes.
    "idle": SQL(
        """
a.state = %(running)s AND a.paid_from <= %(since)s AND NOT EXISTS (
    SELECT 1 FROM rentals_allocationgpu ag
    JOIN telemetry_gpubusy b ON b.gpu_id = ag.gpu_id
    WHERE ag.allocation_id = a.id AND b.at >= %(since)s)
"""
    ),
}


@cache
def allocation_rows(which: str) -> str:
    """The dashboard's list of `which` allocations ("expiring" or "idle"). Rendered on first
    use: the users' table is the user model's, known once the apps are loaded."""
    users = Identifier(get_user_model()._meta.db_table)
    return _ALLOCATIONS.format(users=users, where=_ALLOCATIONS_WHERE[which]).as_string()


# --- Node agents -------------------------------------------------------------------------

# One statement per agent poll: the credential's agent and node, the database's clock, and
# the node's allocations as its desired state lists them (live, paid past now, a scheduled
# one within the lead), each with the GPUs it holds now and the keys of its team's members
# that were chosen for it. The agent's last_seen_at is written in passing, at most every
# %(seen_every)s, so most polls write nothing. rentals.access builds the state from it.
AGENT_POLL = """
WITH agent AS (
    SELECT a.id, a.node_id, a.served_generation, statement_timestamp() AS now
    FROM telemetry_nodeagent a
    WHERE a.key_hash = %(key_hash)s AND a.revoked_at IS NULL
), seen AS (
    UPDATE telemetry_nodeagent a SET last_seen_at = agent.now
    FROM agent
    WHERE a.id = agent.id
      AND (a.last_seen_at IS NULL OR a.last_seen_at < agent.now - %(seen_every)s)
    RETURNING a.id
)
SELECT agent.id, agent.served_generation, agent.now, n.id, n.hostname, n.exporter,
       coalesce((
           SELECT json_agg(json_build_array(
                      al.id, al.state, al.paid_from, al.paid_until,
                      (SELECT coalesce(json_agg(json_build_array(g.index, g.uuid)), '[]')
                       FROM rentals_allocationgpu ag JOIN catalog_gpu g ON g.id = ag.gpu_id
                       WHERE ag.allocation_id = al.id AND NOT ag.released
                         AND ag.ends_at = al.paid_until),  -- its GPUs now, not swapped ones
                      (SELECT coalesce(json_agg(k.public_key), '[]')
                       FROM rentals_allocationkey ak
                       JOIN accounts_sshkey k ON k.id = ak.ssh_key_id
                       JOIN accounts_membership m
                         ON m.user_id = k.user_id AND m.team_id = al.team_id
                       JOIN accounts_team t ON t.id = al.team_id
                       WHERE ak.allocation_id = al.id
                         AND (NOT t.require_second_factor OR EXISTS (
                               SELECT 1 FROM mfa_authenticator f
                               WHERE f.user_id = k.user_id AND f.type = %(totp)s))),
                      al.vcpus_per_gpu, al.ram_gib_per_gpu))
           FROM rentals_allocation al
           WHERE al.node_id = n.id AND al.state = ANY(%(live)s) AND al.paid_until > agent.now
             AND (al.state <> %(scheduled)s OR al.paid_from <= agent.now + %(lead)s)
       ), '[]') AS allocations,
       (SELECT count(*) FROM seen)
FROM agent JOIN catalog_node n ON n.id = agent.node_id
"""


# --- When the provider fails: maintenance windows, impairments, spare GPUs ----------------


def gpu_broken(gpu: Composable) -> Composed:
    """`gpu` cannot work now, by an open flag on it: missing from its exporter, AMD's
    uncorrectable memory errors (RAS), or an XID of the fatal set. Parameters: `broken_kinds`,
    `xid` and `fatal_xids`. The impairment sync and the choice of spares read this one rule."""
    return SQL(
        """EXISTS (
      SELECT 1 FROM telemetry_flag bf
      WHERE bf.gpu_id = {gpu} AND bf.closed_at IS NULL
        AND (bf.kind = ANY(%(broken_kinds)s)
             OR (bf.kind = %(xid)s AND bf.code = ANY(%(fatal_xids)s))))"""
    ).format(gpu=gpu)


# Nodes that could take GPUs over for [starts_at, ends_at): of the model and region (a cluster
# member: of its network group, whole nodes only), in service and answering, with `count`
# GPUs that are free for the window, working and not `exclude`d; the fullest first, as
# placement packs. `not_nodes`: nodes to pass over (the allocation's own, when it moves away).
SPARE_NODES = (
    SQL(
        """
SELECT n.id
FROM catalog_node n JOIN catalog_gpu g ON g.node_id = n.id
WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s AND n.region_id = %(region)s
  AND n.id <> ALL(%(not_nodes)s) AND n.health <> ALL(%(down)s)
  AND (%(group)s = '' OR n.network_group = %(group)s)
  AND g.id <> ALL(%(exclude)s) AND {free} AND NOT {broken}
GROUP BY n.id
HAVING count(*) >= %(count)s AND (NOT %(whole)s OR count(*) = n.gpu_count)
ORDER BY count(*), n.id
"""
    )
    .format(free=gpu_free(_G_ID, **_WINDOW), broken=gpu_broken(_G_ID))
    .as_string()
)

# The GPUs of one (locked) node that are free for [starts_at, ends_at), working and not
# `exclude`d, by index: what a replacement or a move takes.
SPARE_GPUS = (
    SQL(
        """
SELECT g.id, g.node_id, g.index, g.uuid FROM catalog_gpu g
WHERE g.node_id = %(node)s AND g.id <> ALL(%(exclude)s) AND {free} AND NOT {broken}
ORDER BY g.index
"""
    )
    .format(free=gpu_free(_G_ID, **_WINDOW), broken=gpu_broken(_G_ID))
    .as_string()
)


def node_down_long(node: Composable) -> Composed:
    """`node` has answered nothing (unreachable or stale) for longer than IMPAIRED_NODE_AFTER,
    judged only from the polls made in its current run of polls: since its last good poll
    or, when that is older, since the run began (`polled_since`: after the console's own
    gap, a stop or a restart, the time before counts for nothing), and only while it is
    being polled (`watched`: its last poll is recent). A node nobody polls is not down; it
    is not watched. Parameters: `down` (health words), `cutoff`, `watched`."""
    return SQL(
        """({node}.health = ANY(%(down)s) AND {node}.last_poll_at >= %(watched)s
        AND greatest(coalesce({node}.last_good_poll_at, '-infinity'::timestamptz),
                     coalesce({node}.polled_since, 'infinity'::timestamptz)) <= %(cutoff)s)"""
    ).format(node=node)


def node_unwatched(node: Composable) -> Composed:
    """`node` is not being polled now (its last poll is older than `watched`, or none): what
    it does is unknown, so a mark for its being down is neither set nor cleared."""
    return SQL("""({node}.last_poll_at IS NULL OR {node}.last_poll_at < %(watched)s)""").format(
        node=node
    )


# The one rule of an impaired allocation: each live allocation holding, now, a GPU that
# cannot work (`gpu_broken`) or a GPU of a node down for too long, with those GPUs' ids and
# whether the node is the cause. The impairment sync reads it after each poll's flags.
IMPAIRED_NOW = (
    SQL(
        """
SELECT ag.allocation_id,
       array_agg(ag.gpu_id ORDER BY ag.gpu_id) AS gpus,
       bool_or({node_down}) AS node_down
FROM rentals_allocationgpu ag
JOIN rentals_allocation a ON a.id = ag.allocation_id
JOIN catalog_gpu g ON g.id = ag.gpu_id
JOIN catalog_node n ON n.id = g.node_id
WHERE NOT ag.released AND ag.starts_at <= %(now)s AND ag.ends_at > %(now)s
  AND a.state = ANY(%(started)s)
  AND (%(only)s::uuid IS NULL OR ag.allocation_id = %(only)s)
  AND ({broken} OR {node_down})
GROUP BY ag.allocation_id
ORDER BY ag.allocation_id
"""
    )
    .format(broken=gpu_broken(_G_ID), node_down=node_down_long(Identifier("n")))
    .as_string()
)
