"""Accounts' hand-written SQL: the two statements `accounts.roles` asks on every request.

Composed with `psycopg.sql` and rendered to plain text once, as every app's `sql.py` is
(docs/architecture.md, "Where SQL lives").
"""

from psycopg.sql import SQL, Identifier

from accounts.models import Team

# The person's role in a team, if they are a member.
ROLE = "SELECT role FROM accounts_membership WHERE team_id = %s AND user_id = %s"

# The columns of `Team` in `TEAM_FIELDS` order, for `Team.from_db` on a `PERSONAL` row.
TEAM_FIELDS = [f.attname for f in Team._meta.concrete_fields]

# The personal team and the person's role in it, in one statement: asked on every request.
PERSONAL = (
    SQL(
        """
SELECT {columns}, m.role
FROM accounts_team t
LEFT JOIN accounts_membership m ON m.team_id = t.id AND m.user_id = %s
WHERE t.personal_for_id = %s
"""
    )
    .format(columns=SQL(", ").join(Identifier("t", f.column) for f in Team._meta.concrete_fields))
    .as_string()
)

# Whether the person `%(user)s` signed up with addresses and confirmed none: what
# `accounts.selectors.email_unverified` says, as a clause for a purchase's statement that
# reads its quote (`rentals.sql.booking.QUOTE_LOCKED`).
EMAIL_UNVERIFIED = """(
    EXISTS (SELECT FROM account_emailaddress e WHERE e.user_id = %(user)s)
    AND NOT EXISTS (SELECT FROM account_emailaddress e
                    WHERE e.user_id = %(user)s AND e.verified)
)"""
