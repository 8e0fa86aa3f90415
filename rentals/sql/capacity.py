"""Capacity: the nodes with room (availability and placement), the calendar's free GPUs per
day, the start windows that fit, and the catalog cache's clock."""

from psycopg.sql import SQL, Composable, Composed, Identifier, Placeholder

from rentals.sql.holdings import (
    G_ID,
    WINDOW,
    gpu_free,
    gpu_held,
    gpus_held_per_node,
    holding_overlaps,
)

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


def _room(model_nodes: Composed) -> Composed:
    return SQL(
        """
SELECT m.id AS node_id, m.gpu_count - coalesce(held.gpus, 0) AS free
FROM catalog_node m
LEFT JOIN ({held}) AS held ON held.node_id = m.id
WHERE {model_nodes} AND m.gpu_count - coalesce(held.gpus, 0) >= %(count)s
"""
    ).format(
        model_nodes=model_nodes,
        held=gpus_held_per_node(
            node_ids=SQL("SELECT m.id FROM catalog_node m WHERE {}").format(model_nodes), **WINDOW
        ),
    )


_ROOM = _room(_MODEL_NODES)
# The same, among `candidates` only (node ids: the capacity read model's first guess), so
# only their holdings are counted, each node's from its own index.
_ROOM_AMONG = _room(SQL("{} AND m.id = ANY(%(candidates)s)").format(_MODEL_NODES))

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
    .format(model_nodes=_MODEL_NODES, overlaps=holding_overlaps(**WINDOW))
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
    .format(free=gpu_free(G_ID, **WINDOW))
    .as_string()
)


# The fullest node with room that no other booking holds right now, its row locked, with its
# region (`rentals.placement.place_locked`): among the model's nodes (PLACE), or among the
# `candidates` the capacity read model names (PLACE_AMONG: at most K nodes' holdings read).
def _place(room: Composed) -> str:
    return (
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
        .format(room=room, stack=stack_meets("c"))
        .as_string()
    )


PLACE = _place(_ROOM)
PLACE_AMONG = _place(_ROOM_AMONG)

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
    .format(held=gpu_held(G_ID, **WINDOW), stack=stack_meets("n"))
    .as_string()
)

_IN_REGION = SQL("AND n.region_id = %(region)s")

# Each node's GPUs held per day k from `first` (`days` of them), as the step function
# `node_busy (node_id, k, busy)`: the CTEs `spans`, `holding`, `node_day` and `node_busy`
# over a CTE `live (node_id, gpu_id, starts_at, ends_at)` of live holdings, which the
# statement that composes it defines first (the calendar's FREE_BY_DAY, the capacity read
# model's refresh in rentals.sql.summary). Each holding becomes the days it touches
# [ks, ke]; a GPU counts once a day: its next holding, when it starts on the day the one
# before ends, counts from the day after (one GPU's live holdings never overlap).
BUSY_BY_DAY = SQL(
    """spans AS (
    SELECT node_id, gpu_id, starts_at,
           greatest(floor(date_part('epoch', starts_at - %(first)s::timestamptz) / 86400),
                    0)::int AS ks,
           least(ceil(date_part('epoch', ends_at - %(first)s::timestamptz) / 86400) - 1,
                 %(days)s - 1)::int AS ke
    FROM live
), holding AS (
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
)"""
)

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
), live AS (
    SELECT ag.node_id, ag.gpu_id, ag.starts_at, ag.ends_at
    FROM rentals_allocationgpu ag
    WHERE ag.node_id IN (SELECT id FROM nodes) AND {overlaps}
), {busy_by_day}, moves AS (
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
    region=SQL(""), overlaps=_CALENDAR_HOLDINGS, stack=_STACK_N, busy_by_day=BUSY_BY_DAY
).as_string()
FREE_BY_DAY_IN_REGION = _FREE_BY_DAY.format(
    region=_IN_REGION, overlaps=_CALENDAR_HOLDINGS, stack=_STACK_N, busy_by_day=BUSY_BY_DAY
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

# (region, network group, hostnames, how many nodes) where the request fits from `t` for
# `duration`: GPUs on one node, or (`whole`) `nodes` whole nodes of one network group, fewest
# first; at most `shown` hostnames, the fullest first, so the answer does not grow with the
# fleet (the count says how many fit). A node's
# free GPUs are its GPU count (Node.gpu_count) less those held in the window, counted per
# node from the live holdings (`gpus_held_per_node`): no GPU row is read, and only the
# model's nodes' holdings are counted. `fitting_at` builds it from the nodes asked (`{nodes}`:
# id, hostname, region_id, gpus, grp) and those of them whose holdings are read.
_FITTING_AT = SQL(
    """
WITH nodes AS MATERIALIZED (
{nodes}
), held AS (
{held}
), free AS (
    SELECT nodes.hostname, r.slug AS region, nodes.grp, nodes.gpus,
           nodes.gpus - coalesce(held.gpus, 0) AS free
    FROM nodes
    JOIN catalog_region r ON r.id = nodes.region_id
    LEFT JOIN held ON held.node_id = nodes.id
)
SELECT region, grp, (array_agg(hostname ORDER BY free, hostname))[1:%(shown)s], count(*)::int
FROM free
WHERE free >= %(count)s AND (NOT %(whole)s OR free = gpus AND gpus = %(per_node)s)
GROUP BY region, grp
HAVING count(*) >= %(nodes)s
ORDER BY count(*), region, grp
"""
)
_MODEL_NODES_FITTING = SQL(
    """    SELECT n.id, n.hostname, n.region_id, n.gpu_count AS gpus,
           CASE WHEN %(whole)s THEN n.network_group ELSE '' END AS grp
    FROM catalog_node n
    WHERE n.gpu_model_id = %(model)s AND n.state = %(active)s AND n.gpu_count > 0 {region}
      AND (NOT %(whole)s OR n.network_group <> '') AND {stack}"""
)


def fitting_at(*, nodes: Composable, held_nodes: Composable) -> Composed:
    """FITTING_AT's statement over the nodes of `nodes` (a query), reading the holdings in
    the window of those `held_nodes` (a query of ids) names: the others count as free."""
    held = gpus_held_per_node(
        node_ids=held_nodes,
        starts=Placeholder("t"),
        ends=SQL("{}::timestamptz + {}").format(Placeholder("t"), Placeholder("duration")),
    )
    return _FITTING_AT.format(nodes=nodes, held=held)


_ALL_HELD = SQL("SELECT id FROM nodes")
FITTING_AT = fitting_at(
    nodes=_MODEL_NODES_FITTING.format(region=SQL(""), stack=_STACK_N), held_nodes=_ALL_HELD
).as_string()
FITTING_AT_IN_REGION = fitting_at(
    nodes=_MODEL_NODES_FITTING.format(region=_IN_REGION, stack=_STACK_N), held_nodes=_ALL_HELD
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


# The next instant the catalog's figures change by time alone: a holding starting or
# ending, a scheduled price taking effect (`CATALOG_NEXT_PRICE`: all there is to wait for
# where every model's GPUs free now come from the capacity read model, whose refresh moves
# the catalog's version on).
CATALOG_NEXT_PRICE = (
    "SELECT min(effective_from) FROM catalog_gpuprice WHERE effective_from > %(now)s"
)
# The active models whose capacity summary is missing or older than `%(fresh)s`, and the
# oldest summary's as_of.
CATALOG_SUMMARIES = """
SELECT count(*) FILTER (WHERE s.as_of IS NULL OR s.as_of < %(fresh)s), min(s.as_of)
FROM catalog_gpumodel m
LEFT JOIN rentals_capacitysummary s ON s.gpu_model_id = m.id
WHERE m.is_active
"""
CATALOG_NEXT_CHANGE = """
SELECT least(
    (SELECT min(starts_at) FROM rentals_allocationgpu  -- a later start ends later: live
     WHERE NOT released AND ends_at > %(now)s AND starts_at > %(now)s),
    (SELECT min(ends_at) FROM rentals_allocationgpu WHERE NOT released AND ends_at > %(now)s),
    (SELECT min(effective_from) FROM catalog_gpuprice WHERE effective_from > %(now)s)
)
"""
