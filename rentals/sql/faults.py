"""When the provider fails: maintenance windows, impairments, spare GPUs."""

from psycopg.sql import SQL, Composable, Composed, Identifier

from rentals.sql.holdings import G_ID, WINDOW, gpu_free

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
    .format(free=gpu_free(G_ID, **WINDOW), broken=gpu_broken(G_ID))
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
    .format(free=gpu_free(G_ID, **WINDOW), broken=gpu_broken(G_ID))
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
  AND (%(nodes)s::int[] IS NULL OR ag.node_id = ANY(%(nodes)s::int[]))
  AND ({broken} OR {node_down})
GROUP BY ag.allocation_id
ORDER BY ag.allocation_id
"""
    )
    .format(broken=gpu_broken(G_ID), node_down=node_down_long(Identifier("n")))
    .as_string()
)
