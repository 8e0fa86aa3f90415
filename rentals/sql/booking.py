"""The booking's write and the transitions by time (enforcement)."""

from psycopg.sql import SQL, Identifier

from accounts.models import Team
from accounts.sql import EMAIL_UNVERIFIED
from catalog.models import GpuModel, Region, RentalPeriod
from core.db import Joined
from rentals.models import Allocation, Quote

# --- Booking, enforcement, idempotency ----------------------------------------------------

# What a booking reads with its quote, and the quote's row lock, in one statement: the quote
# and the rows the booking reads through it (`QUOTE_LOCKED_ROW`), then the
# database's clock, whether the quote was booked already and whether the person still has
# to confirm an e-mail address. Written by hand (`core.db.Joined`): the ORM spent more CPU
# compiling this one statement than the rest of the booking did in Python.
QUOTE_LOCKED_ROW = Joined(
    Quote, "q", [("m", "gpu_model"), ("p", "period"), ("t", "team"), ("r", "region")]
)
QUOTE_LOCKED = (
    SQL(
        """
SELECT {columns}, statement_timestamp() AS clock,
       EXISTS (SELECT FROM {allocation} a WHERE a.quote_id = q.id) AS booked,
       {unverified} AS unverified
FROM {quote} q
JOIN {gpu_model} m ON m.id = q.gpu_model_id
JOIN {period} p ON p.id = q.period_id
JOIN {team} t ON t.id = q.team_id
LEFT JOIN {region} r ON r.id = q.region_id
WHERE q.id = %(quote)s AND q.team_id = %(team)s AND q.kind = %(kind)s
FOR UPDATE OF q
"""
    )
    .format(
        columns=QUOTE_LOCKED_ROW.columns,
        allocation=Identifier(Allocation._meta.db_table),
        unverified=SQL(EMAIL_UNVERIFIED),
        quote=Identifier(Quote._meta.db_table),
        gpu_model=Identifier(GpuModel._meta.db_table),
        period=Identifier(RentalPeriod._meta.db_table),
        team=Identifier(Team._meta.db_table),
        region=Identifier(Region._meta.db_table),
    )
    .as_string()
)

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
