"""Who may do what, in one place: the acting person, the team they act for, and what their
role there allows. Every page, API view, CSV, htmx part and telemetry read of rentals, and
every team-management action, asks this module; every service takes the `Acting` it returns.

The role matrix is `TABLE` below, as data: the tests generate every action × role ×
credential case from it (tests/accounts/test_role_matrix.py).

What a credential brings:
- a session acts with the member's role, for the team chosen in the header's switcher (or
  the team a team URL names);
- an API token acts for its own team only, with its role, which can only narrow the
  member's role at the moment of use (a demoted or removed member's token shrinks or dies);
- a team that requires two-factor sign-in refuses everything but reading the team and
  leaving it to a member without a second factor.

Staff also read every team's rentals, and change none but their own team's. The provider's
answers to its own faults (maintenance windows, replacing an impaired allocation's GPUs,
crediting impaired time) are operator actions on any team's rentals: `Operation` below, for
staff who hold its permission (superusers hold them all).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.http import HttpRequest
from django.utils.translation import gettext as _

from accounts import sql
from accounts.errors import NotAllowed, SecondFactorRequired, TeamNotFound
from accounts.models import ApiToken, Membership, Role, Team
from accounts.signin import has_second_factor

TEAM_SESSION_KEY = "team_id"


class Action(StrEnum):
    READ = "read"  # quotes, allocations, clusters, telemetry, usage, webhook endpoints
    BOOK = "book"  # quote, book, extend: purchases
    ACT = "act"  # stop, start, cancel; webhook endpoints
    READ_LEDGER = "read_ledger"  # statement, CSV, ledger API
    READ_INVOICES = "read_invoices"  # invoices and credit notes: page, PDF, XML, zip, API
    READ_TEAM = "read_team"  # the team, its members
    INVITE = "invite"  # invite, list and revoke invitations
    SET_ROLE = "set_role"
    REMOVE_MEMBER = "remove_member"  # somebody else; anyone may leave
    SET_SPEND_LIMIT = "set_spend_limit"
    TRANSFER = "transfer"  # hand the ownership to another member
    REQUIRE_SECOND_FACTOR = "require_second_factor"
    SET_BUYER = "set_buyer"  # the team's buyer details on invoices
    READ_AUDIT = "read_audit"  # the team's audit log (page and API)
    DELETE_TEAM = "delete_team"  # a team without history (accounts.services.teams.team_delete)
    MANAGE_CARDS = "manage_cards"  # save, remove and choose the default card (payments)
    EXPORT_LEDGER = "export_ledger"  # prepare and download the statement's background exports


# The role matrix: who may do what. Tests generate every case from this table.
ROLES = (Role.OWNER, Role.MEMBER, Role.BILLING, Role.VIEWER)
YES, NO = True, False
# fmt: off
TABLE: dict[Action, tuple[bool, bool, bool, bool]] = {
    #                              owner member billing viewer
    Action.READ:                  (YES,  YES,   YES,    YES),
    Action.BOOK:                  (YES,  YES,   NO,     NO),
    Action.ACT:                   (YES,  YES,   NO,     NO),
    Action.READ_LEDGER:           (YES,  YES,   YES,    NO),
    Action.READ_INVOICES:         (YES,  NO,    YES,    NO),
    Action.READ_TEAM:             (YES,  YES,   YES,    YES),
    Action.INVITE:                (YES,  NO,    NO,     NO),
    Action.SET_ROLE:              (YES,  NO,    NO,     NO),
    Action.REMOVE_MEMBER:         (YES,  NO,    NO,     NO),
    Action.SET_SPEND_LIMIT:       (YES,  NO,    NO,     NO),
    Action.TRANSFER:              (YES,  NO,    NO,     NO),
    Action.REQUIRE_SECOND_FACTOR: (YES,  NO,    NO,     NO),
    Action.SET_BUYER:             (YES,  NO,    YES,    NO),
    Action.READ_AUDIT:            (YES,  NO,    YES,    NO),
    Action.DELETE_TEAM:           (YES,  NO,    NO,     NO),
    Action.MANAGE_CARDS:          (YES,  NO,    YES,    NO),
    Action.EXPORT_LEDGER:         (YES,  NO,    YES,    NO),
}
# fmt: on


def allowed_by(table: Mapping[Action, tuple[bool, ...]]) -> dict[Role, frozenset[Action]]:
    """The table read by role: what each role may do."""
    return {
        role: frozenset(action for action, row in table.items() if row[column])
        for column, role in enumerate(ROLES)
    }


ALLOWED = allowed_by(TABLE)
# What a member without a second factor may still do in a team that requires one.
WITHOUT_SECOND_FACTOR = frozenset({Action.READ_TEAM})


@dataclass(frozen=True)
class Acting:
    """A person acting for one team; `allowed` is their role's actions (a token's role can
    only narrow them)."""

    user: User
    team: Team
    role: str
    allowed: frozenset[Action]
    token: ApiToken | None = None
    second_factor_missing: bool = False

    def can(self, action: Action) -> bool:
        if self.second_factor_missing and action not in WITHOUT_SECOND_FACTOR:
            return False
        return action in self.allowed

    def require(self, action: Action) -> None:
        if self.can(action):
            return
        if self.second_factor_missing and action in self.allowed:
            raise SecondFactorRequired(
                _(
                    "%(team)s requires two-factor sign-in: turn it on under Account → "
                    "Two-factor, then try again."
                )
                % {"team": self.team.name}
            )
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


def _role(team: Team, user) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(sql.ROLE, [team.pk, user.pk])
        found = cursor.fetchone()
    return found[0] if found else None


def _personal_team_and_role(user) -> tuple[Team, str | None]:
    with connection.cursor() as cursor:
        cursor.execute(sql.PERSONAL, [user.pk, user.pk])
        found = cursor.fetchone()
    if found is None:
        team = _personal_team_create(user)
        return team, _role(team, user)
    return Team.from_db(connection.alias, sql.TEAM_FIELDS, found[:-1]), found[-1]


def acting_as(
    user, team: Team | None = None, role: str | None = None, *, token: ApiToken | None = None
) -> Acting:
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
    return Acting(
        user=user,
        team=team,
        role=role or member_role,
        allowed=allowed,
        token=token,
        second_factor_missing=team.require_second_factor and not has_second_factor(user),
    )


class Operation(StrEnum):
    """What staff operators may do to any team's rentals, each by a Django permission (the
    admin's groups hand them out; superusers hold them all)."""

    MAINTAIN = "rentals.schedule_maintenance"  # maintenance windows: move or cancel bookings
    REPLACE = "rentals.replace_gpus"  # swap an impaired allocation's GPUs
    CREDIT = "rentals.issue_credit"  # credit notes for impaired time: money


def operator_can(user, operation: Operation) -> bool:
    return bool(user and user.is_active and user.is_staff and user.has_perm(operation))


def operator_require(user, operation: Operation) -> None:
    """Refuse an operator action to anyone but active staff with its permission."""
    if not operator_can(user, operation):
        raise NotAllowed(_("Only staff with the permission for this may do it."))


def operator_acting(user, team: Team) -> Acting:
    """A superuser operating on a team's rentals from the admin (stop, start)."""
    if not user.is_superuser:
        raise NotAllowed(_("Only operators (superusers) act for other teams."))
    return Acting(user=user, team=team, role=Role.OWNER, allowed=ALLOWED[Role.OWNER])


# A page's form names the team it was made for in this field: what it posts acts for that
# team, whatever the switcher says by then (another tab may have switched since).
FORM_TEAM_FIELD = "acting_team"


def acting_for_request(request) -> Acting:
    """Whom a request acts for: an API token's team and role; else, for a page's form that
    names the team it was made for (`FORM_TEAM_FIELD`), that team, if the person still
    belongs to it; else the team chosen with the switcher (kept in the session), else the
    personal team. Cached on the request."""
    cached = getattr(request, "_acting", None)
    if cached is not None:
        return cached
    form_team = _form_team_id(request)
    if form_team is None:
        acting = acting_for_session(request)
    else:
        team = Team.objects.filter(pk=form_team, memberships__user=request.user).first()
        if team is None:
            raise NotAllowed(
                _(
                    "This form was made for a team you no longer belong to: nothing was "
                    "done. Open the page again."
                )
            )
        acting = acting_as(request.user, team)
    request._acting = acting
    return acting


def acting_for_session(request) -> Acting:
    """Whom the person acts for by the header's switcher (a token: its own team), whatever a
    form says: the header shows it, and pages about another team's rentals compare with it."""
    cached = getattr(request, "_acting_session", None)
    if cached is not None:
        return cached
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        acting = acting_as(request.user, auth.team, auth.role, token=auth)
    else:
        team_id = request.session.get(TEAM_SESSION_KEY) if hasattr(request, "session") else None
        # No team chosen: pk=None matches no row, as Django means it (the personal team
        # then); the plugin takes only a str or int for pk.
        team = Team.objects.filter(
            pk=team_id,  # type: ignore[misc]
            memberships__user=request.user,
        ).first()
        acting = acting_as(request.user, team)
    request._acting_session = acting
    return acting


def _form_team_id(request) -> int | None:
    """The team a page's posted form was made for, or None (an API request, a GET, a form
    that names none). Only plain page requests: the API's body is never read here."""
    if not isinstance(request, HttpRequest) or request.method != "POST":
        return None
    if isinstance(getattr(request, "auth", None), ApiToken):
        return None
    value = request.POST.get(FORM_TEAM_FIELD, "")
    return int(value) if value.isdecimal() and len(value) < 12 else None


def acting_for_team_of(request, team_id: int | None) -> Acting:
    """Whom a page about one team's rental reads it as: the switcher's team when the rental
    is that team's; else, for a member of the rental's team, that team, in their role
    there (any page of a rental of a team one belongs to opens, and says whose it is);
    anyone else, the switcher's team (staff read every team's rentals; others find
    nothing)."""
    acting = acting_for_request(request)
    if team_id is None or acting.team.pk == team_id or acting.token is not None:
        return acting
    team = Team.objects.filter(pk=team_id, memberships__user=request.user).first()
    return acting if team is None else acting_as(request.user, team)


def acting_for_team(request, team_id: int) -> Acting:
    """Whom a request acts as in the team a URL names: a session for any team the person
    belongs to, a token for its own team only. Not a member: the team is not found, as for
    anyone else."""
    team = Team.objects.filter(pk=team_id, memberships__user=request.user).first()
    if team is None:
        raise TeamNotFound(_("No such team among yours."))
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        if auth.team_id != team.pk:
            raise NotAllowed(_("This API token acts for %(team)s only.") % {"team": auth.team.name})
        return acting_for_request(request)
    return acting_as(request.user, team)
