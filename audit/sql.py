"""The audit log's hand-written SQL: the conditions of the triggers that keep its tables
append-only, and the statement the retention task runs."""

from functools import cache

from psycopg import sql

# The retention task names the newest time it may delete (set_config(…, true): for its
# transaction only); any other DELETE, and a DELETE of a row at or after that time, is
# refused by the trigger whose WHEN this is.
DELETE_REFUSED = (
    "OLD.pgh_created_at >= COALESCE("
    "NULLIF(current_setting('anchorgpu.audit_delete_before', true), '')::timestamptz, "
    "'-infinity'::timestamptz)"
)

# Declares the retention's cutoff for the current transaction.
DELETE_BEFORE = sql.SQL(
    "SELECT set_config('anchorgpu.audit_delete_before', %(before)s, true)"
).as_string()


@cache
def delete_older_than(table: str) -> str:
    """Delete one event table's rows older than the declared cutoff."""
    return (
        sql.SQL("DELETE FROM {} WHERE pgh_created_at < %(before)s")
        .format(sql.Identifier(table))
        .as_string()
    )
