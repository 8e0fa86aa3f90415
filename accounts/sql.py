"""Accounts' hand-written SQL: the two statements `accounts.roles` asks on every request.

Composed with `psycopg.sql` and rendered to plain text once, as every app's `sql.py` is
(docs/architecture.md, "Where SQL lives").
"""

from psycopg.sql import SQL, Identifier

from accounts.models import ApiToken, Team
from core.db import Joined

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

# A live bearer token by its key's hash, with its user and team: asked on every API request
# that carries one (`accounts.auth`). Written by hand (`core.db.Joined`): the ORM spent more
# CPU compiling it than the rest of authentication did.
TOKEN_ROW = Joined(ApiToken, "k", [("u", "user"), ("t", "team")])
TOKEN = (
    SQL(
        """
SELECT {columns}
FROM accounts_apitoken k
JOIN auth_user u ON u.id = k.user_id
JOIN accounts_team t ON t.id = k.team_id
WHERE k.key_hash = %(hash)s AND k.revoked_at IS NULL AND k.expires_at > %(now)s
  AND u.is_active
"""
    )
    .format(columns=TOKEN_ROW.columns)
    .as_string()
)
