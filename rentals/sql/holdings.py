"""The one rule every capacity statement is written with: a live holding overlapping a
window (`holding_overlaps`), a GPU held or free, GPUs held per node, and what is held now."""

from psycopg.sql import SQL, Composable, Composed, Identifier, Placeholder


def holding_overlaps(*, starts: Composable, ends: Composable) -> Composed:
    """The holding `ag` is live (unreleased) and overlaps [starts, ends): the rule the
    exclusion constraint `rentals_allocationgpu_no_overlap` guards, as a clause.
    `rentals.selectors.holdings.holdings_overlapping` says the same for the ORM."""
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


G_ID = Identifier("g", "id")
WINDOW = {"starts": Placeholder("starts_at"), "ends": Placeholder("ends_at")}


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


def held_day_span(held: Composable) -> Composed:
    """A LATERAL join giving each row of `held` (its starts_at and ends_at) its span in
    whole microseconds from `%(day0)s`, clipped to [day0, day_n) (`x.s`, `x.e`: rounded
    once, integers from there on), and the numbers of its first and last day of
    `%(day_us)s` (`x.i0`, `x.i1`): how booked-ahead GPU time is counted per day, by the
    fleet report (`reports.sql.BOOKED_AHEAD`) and the capacity read model alike."""
    return SQL(
        """CROSS JOIN LATERAL (
        SELECT s, e, (s / %(day_us)s)::int AS i0, ((e + %(day_us)s - 1) / %(day_us)s)::int - 1 AS i1
        FROM (SELECT
            round(date_part('epoch', greatest({held}.starts_at, %(day0)s) - %(day0)s) * 1e6)::bigint
                AS s,
            round(date_part('epoch', least({held}.ends_at, %(day_n)s) - %(day0)s) * 1e6)::bigint
                AS e) AS us
    ) AS x"""
    ).format(held=held)
