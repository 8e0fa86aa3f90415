"""Who may do what, in one place: the acting person, the team they act for, and what their
role there allows. Every page, API view, CSV, htmx part and telemetry read of rentals asks
this module, and every service takes the `Acting` it returns.

| action        | owner | member | billing | viewer |
|---------------|:-----:|:------:|:-------:|:------:|
| read rentals  |   ✓   |   ✓    |    ✓    |   ✓    |
| book, extend  |   ✓   |   ✓    |         |        |
| stop, start, cancel | ✓ | ✓    |         |        |
| read ledger   |   ✓   |   ✓    |    ✓    |        |
| manage team   |   ✓   |        |         |        |

Staff also read every team's rentals, and change none but their own team's.
"""

from dataclasses import dataclass
from enum import StrEnum

from django.db import connection, transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.models import ApiToken, Membership, Role, Team
from core.errors import DomainError

TEAM_SESSION_KEY = "team_id"


class Action(StrEnum):
    READ = "read"
    BOOK = "book"
    ACT = "act"
    READ_LEDGER = "read_ledger"
    MANAGE_TEAM = "manage_team"


ALLOWED = {
    Role.OWNER: frozenset(Action),
    Role.MEMBER: frozenset({Action.READ, Action.BOOK, Action.ACT, Action.READ_LEDGER}),
    Role.BILLING: frozenset({Action.READ, Action.READ_LEDGER}),
    Role.VIEWER: frozenset({Action.READ}),
}


class NotAllowed(DomainError):
    status = 403
    code = "not_allowed"
    title = gettext_lazy("Your role in this team does not allow this")


@dataclass(frozen=True)
class Acting:
    """A person acting for one team; `allowed` is their role's actions (a token's role can
    only narrow them)."""

    user: object
    team: Team
    role: str
    allowed: frozenset

    def can(self, action: Action) -> bool:
        return action in self.allowed

    def require(self, action: Action) -> None:
        if not self.can(action):
            raise NotAllowed(
                _("As %(role)s of %(team)s you cannot do this.")
                % {"role": Role(self.role).label, "team": self.team.name}
            )

    @property
    def sees_every_team(self) -> bool:
        return bool(self.user.is_staff)


def personal_team(user) -> Team:
    """The user's own team, created on first need (users made by any path get one): read as
    `acting_as` reads it on every signed-in request (one statement, no transaction)."""
    return _personal_team_and_role(user)[0]


@transaction.atomic
def _personal_team_create(user) -> Team:
    team, _created = Team.objects.get_or_create(
        personal_for=user, defaults={"name": user.get_username()}
    )
    Membership.objects.get_or_create(team=team, user=user, defaults={"role": Role.OWNER})
    return team


_ROLE = "SELECT role FROM accounts_membership WHERE team_id = %s AND user_id = %s"
_TEAM_FIELDS = [f.attname for f in Team._meta.concrete_fields]
# The personal team and the person's role in it, in one statement: asked on every request.
_PERSONAL = f"""
SELECT {", ".join(f"t.{f.column}" for f in Team._meta.concrete_fields)}, m.role
FROM accounts_team t
LEFT JOIN accounts_membership m ON m.team_id = t.id AND m.user_id = %s
WHERE t.personal_for_id = %s
"""


def _role(team: Team, user) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(_ROLE, [team.pk, user.pk])
        found = cursor.fetchone()
    return found[0] if found else None


def _personal_team_and_role(user) -> tuple[Team, str | None]:
    with connection.cursor() as cursor:
        cursor.execute(_PERSONAL, [user.pk, user.pk])
        found = cursor.fetchone()
    if found is None:
        team = _personal_team_create(user)
        return team, _role(team, user)
    return Team.from_db(connection.alias, _TEAM_FIELDS, found[:-1]), found[-1]


def acting_as(user, team: Team | None = None, role: str | None = None) -> Acting:
    """`user` acting for `team` (their personal team by default), as their membership allows
    and, for a token, no more than `role`."""
    if team is None:
        team, member_role = _personal_team_and_role(user)
    else:
        member_role = _role(team, user)
    if member_role is None:
        raise NotAllowed(_("You are not a member of %(team)s.") % {"team": team.name})
    allowed = ALLOWED[Role(member_role)]
    if role is not None:
        allowed = allowed & ALLOWED[Role(role)]
    return Acting(user=user, team=team, role=role or member_role, allowed=allowed)


def operator_acting(user, team: Team) -> Acting:
    """A superuser operating on a team's rentals from the admin (stop, start)."""
    if not user.is_superuser:
        raise NotAllowed(_("Only operators (superusers) act for other teams."))
    return Acting(user=user, team=team, role=Role.OWNER, allowed=ALLOWED[Role.OWNER])


def acting_for_request(request) -> Acting:
    """Whom a request acts for: an API token's team and role, else the team chosen with
    the switcher (kept in the session), else the personal team. Cached on the request."""
    cached = getattr(request, "_acting", None)
    if cached is not None:
        return cached
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        acting = acting_as(request.user, auth.team, auth.role)
    else:
        team_id = request.session.get(TEAM_SESSION_KEY) if hasattr(request, "session") else None
        team = Team.objects.filter(pk=team_id, memberships__user=request.user).first()
        acting = acting_as(request.user, team)
    request._acting = acting
    return acting
