"""Idempotency keys: the stored answer and its claim."""

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
