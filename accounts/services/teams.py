"""Teams: creating them, inviting colleagues, roles, removing members, the spend limit.

A team always keeps an owner: the services refuse to remove or demote the last one, and a
deferred database trigger (accounts 0007) refuses it whatever path writes the rows.
"""

import enum
import logging
import secrets
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Final

from allauth.account.models import EmailAddress
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, ProtectedError, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.buyer import buyer_check, buyer_problems, stored_tax_treatment, team_tax_treatment
from accounts.errors import (
    AlreadyMember,
    InvitationInvalid,
    InvitationNotYours,
    LastOwner,
    PersonalTeam,
    SecondFactorRequired,
    TeamHasHistory,
)
from accounts.models import (
    ApiToken,
    BuyerProblem,
    BuyerReview,
    Invitation,
    Membership,
    Role,
    SpendLimitChange,
    Team,
    token_hash,
)
from accounts.roles import Acting, Action
from accounts.signin import has_second_factor
from core.db import db_now
from core.errors import Invalid, as_invalid, validated
from core.money import amount_check, default_currency

logger = logging.getLogger(__name__)
INVITATION_LIFETIME = timedelta(days=7)


@transaction.atomic
def team_create(*, user: User, name: str) -> Team:
    team = Team.objects.create(name=name)
    Membership.objects.create(team=team, user=user, role=Role.OWNER)
    return team


def email_mask(email: str) -> str:
    """Enough of an address for its owner to recognise it, not enough to harvest it."""
    local, _at, domain = email.partition("@")
    return f"{local[:1]}{'•' * max(len(local) - 1, 2)}@{domain}"


@transaction.atomic
def invitation_create(
    *, acting: Acting, email: str, role: str, accept_url: Callable[[str], str]
) -> tuple[Invitation, str]:
    """An invitation and its secret (shown once, and mailed after commit). Inviting an
    address that has an invitation still open renews that one (`renewed` is set on it): its
    role and validity are the new ones and only the new link works, so one address never
    holds two invitations to a team, however often it is sent."""
    acting.require(Action.INVITE)
    if acting.team.personal_for_id is not None:
        raise PersonalTeam(_("Nobody joins a personal team; make a team to invite colleagues."))
    Team.objects.select_for_update().filter(pk=acting.team.pk).first()  # one invite at a time
    if EmailAddress.objects.filter(
        email__iexact=email, verified=True, user__memberships__team=acting.team
    ).exists():
        raise AlreadyMember(
            _("%(email)s is already a member of %(team)s.")
            % {"email": email, "team": acting.team.name},
            field="email",
        )
    secret = secrets.token_urlsafe(32)
    fields = {
        "email": email, "role": Role(role), "key_hash": token_hash(secret),
        "invited_by": acting.user, "expires_at": db_now() + INVITATION_LIFETIME,
    }  # fmt: skip
    invitation = (
        Invitation.objects.filter(
            team=acting.team,
            email__iexact=email,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
        )  # fmt: skip
        .order_by("-created_at")
        .first()
    )
    if invitation is None:
        invitation = Invitation.objects.create(team=acting.team, **fields)
        invitation.renewed = False
    else:
        for name, value in fields.items():
            setattr(invitation, name, value)
        invitation.save(update_fields=list(fields))
        invitation.renewed = True
    link = accept_url(secret)
    team_name, inviter = acting.team.name, acting.user.get_username()

    def mail() -> None:
        try:
            send_mail(
                subject=_("%(who)s invites you to %(team)s on AnchorGPU")
                % {"who": inviter, "team": team_name},
                message=_("Join %(team)s as %(role)s: %(link)s (valid for 7 days)")
                % {"team": team_name, "role": Role(role).label, "link": link},
                from_email=None,
                recipient_list=[email],
            )
        except Exception:  # the inviter also sees the link; a failed mail is logged
            logger.exception("invitation mail to %s", email)

    transaction.on_commit(mail)
    return invitation, secret


@transaction.atomic
def invitation_revoke(*, acting: Acting, invitation_id: int) -> None:
    acting.require(Action.INVITE)
    revoked = Invitation.objects.filter(
        pk=invitation_id, team=acting.team, accepted_at__isnull=True, revoked_at__isnull=True
    ).update(revoked_at=db_now())
    if not revoked:
        raise InvitationInvalid(_("This invitation was already used or revoked."))


def invitation_find(*, secret: str) -> Invitation:
    invitation = (
        Invitation.objects.select_related("team")
        .filter(
            key_hash=token_hash(secret or ""), accepted_at__isnull=True, revoked_at__isnull=True
        )
        .first()
    )
    if invitation is None or invitation.expires_at <= db_now():
        raise InvitationInvalid(_("This invitation was used, revoked or has expired."))
    return invitation


def invitation_usable(*, secret: str) -> bool:
    try:
        invitation_find(secret=secret)
    except InvitationInvalid:
        return False
    return True


def invitation_addressed_to(*, user: User, invitation: Invitation) -> str:
    """Whether the invitation is the user's to accept: "yes"; "unverified" (one of their
    addresses, not confirmed yet); or "no"."""
    address = (
        EmailAddress.objects.filter(user=user, email__iexact=invitation.email)
        .values_list("verified", flat=True)
        .first()
    )
    return "no" if address is None else "yes" if address else "unverified"


@transaction.atomic
def invitation_accept(*, user: User, secret: str) -> Membership:
    """Join the team the link invites to, as the invited address's confirmed owner. The
    claim is one conditional update, so one link makes at most one membership, however
    many people post it at once."""
    invitation = invitation_find(secret=secret)
    match invitation_addressed_to(user=user, invitation=invitation):
        case "no":
            raise InvitationNotYours(
                _(
                    "This invitation was sent to %(email)s. Sign in as that person, or add "
                    "and confirm that address under Account → E-mail addresses."
                )
                % {"email": email_mask(invitation.email)}
            )
        case "unverified":
            raise InvitationNotYours(
                _("Confirm %(email)s first: open the link we sent to it, then come back here.")
                % {"email": invitation.email}
            )
    if Membership.objects.filter(team=invitation.team, user=user).exists():
        raise AlreadyMember(
            _("You are already a member of %(team)s.") % {"team": invitation.team.name}
        )
    now = db_now()
    claimed = Invitation.objects.filter(
        pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
    ).update(accepted_at=now, accepted_by=user)
    if not claimed:
        raise InvitationInvalid(_("This invitation was used, revoked or has expired."))
    membership, _created = Membership.objects.get_or_create(
        team=invitation.team, user=user, defaults={"role": invitation.role}
    )
    return membership


@transaction.atomic
def team_delete(*, acting: Acting) -> str:
    """Delete a team that has no history, with what is only its own: memberships,
    invitations, API tokens, webhook endpoints and quotes nobody booked. Returns its name.

    A team with history stays: its allocations, ledger rows and invoices are the record
    the statement, the invoices and the tax office need, and the database protects them
    (on_delete=PROTECT), so deleting it is refused in words, changing nothing. Its owner
    can still remove its members, or hand it over, and stop using it."""
    acting.require(Action.DELETE_TEAM)
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    if team.personal_for_id is not None:
        raise PersonalTeam(_("A personal team stays with its person; it cannot be deleted."))
    name = team.name
    try:
        team.delete()
    except ProtectedError as exc:
        raise TeamHasHistory(
            _(
                "%(team)s has rentals, charges or invoices, and those are kept for the "
                "statement, the invoices and the tax office, so the team cannot be deleted. "
                "You can remove its members or hand it over instead."
            )
            % {"team": name}
        ) from exc
    return name


def _owners_left(team: Team, *, without: Membership) -> int:
    return Membership.objects.filter(team=team, role=Role.OWNER).exclude(pk=without.pk).count()


@transaction.atomic
def membership_role_set(*, acting: Acting, membership: Membership, role: str) -> Membership:
    acting.require(Action.SET_ROLE)
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    membership = Membership.objects.select_for_update().get(pk=membership.pk, team=team)
    if (
        membership.role == Role.OWNER
        and role != Role.OWNER
        and not _owners_left(team, without=membership)
    ):
        raise LastOwner(_("Make someone else owner before changing the last owner's role."))
    membership.role = Role(role)
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, acting: Acting, membership: Membership) -> None:
    """An owner removes anyone; anyone may leave (remove themselves). The tokens the person
    made for the team die with the membership."""
    if membership.user_id != acting.user.pk:
        acting.require(Action.REMOVE_MEMBER)
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    membership = Membership.objects.select_for_update().get(pk=membership.pk, team=team)
    if team.personal_for_id == membership.user_id:
        raise LastOwner(_("Nobody leaves their personal team."))
    if membership.role == Role.OWNER and not _owners_left(team, without=membership):
        raise LastOwner(_("Make someone else owner before the last owner leaves."))
    membership.delete()
    ApiToken.objects.filter(user_id=membership.user_id, team=team, revoked_at__isnull=True).update(
        revoked_at=db_now()
    )


@transaction.atomic
def team_ownership_transfer(*, acting: Acting, membership: Membership) -> Membership:
    """Hand the team to another member: they become owner, the acting owner a member."""
    acting.require(Action.TRANSFER)
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    if team.personal_for_id is not None:
        raise PersonalTeam(_("A personal team stays with its person."))
    members = {
        m.user_id: m
        for m in Membership.objects.select_for_update()
        .filter(team=team, user_id__in=[membership.user_id, acting.user.pk])
        .order_by("pk")
    }
    if membership.user_id == acting.user.pk or membership.user_id not in members:
        raise Invalid({"membership": _("Choose another member of the team.")})
    new_owner, old_owner = members[membership.user_id], members[acting.user.pk]
    new_owner.role, old_owner.role = Role.OWNER, Role.MEMBER
    for member in (new_owner, old_owner):
        member.save(update_fields=["role"])
    return new_owner


@transaction.atomic
def team_spend_limit_set(*, acting: Acting, limit: Decimal | None) -> Team:
    """Set (or clear, with None) the team's monthly spend limit; the change is recorded."""
    acting.require(Action.SET_SPEND_LIMIT)
    try:
        if limit is not None:
            amount_check(limit, default_currency())
    except ValidationError as exc:
        raise Invalid({"monthly_spend_limit": exc.messages}) from exc
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    SpendLimitChange.objects.create(
        team=team, by=acting.user, old_limit=team.monthly_spend_limit, new_limit=limit
    )
    team.monthly_spend_limit = limit
    validated(team)
    team.save(update_fields=["monthly_spend_limit"])
    return team


@transaction.atomic
def team_second_factor_require(*, acting: Acting, required: bool) -> Team:
    """Require (or stop requiring) two-factor sign-in of every member. Whoever turns it on
    has a second factor already, so nobody locks themselves out by it."""
    acting.require(Action.REQUIRE_SECOND_FACTOR)
    if required and not has_second_factor(acting.user):
        raise SecondFactorRequired(
            _("Turn on two-factor sign-in for yourself first (Account → Two-factor).")
        )
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    team.require_second_factor = required
    team.save(update_fields=["require_second_factor"])
    return team


@transaction.atomic
def team_buyer_set(
    *, acting: Acting, legal_name: str, address: str, country: str, vat_id: str
) -> Team:
    """Set the buyer details invoices will name (all empty: a consumer). Quotes made from
    now on are taxed by them; issued invoices keep the details they were issued with."""
    acting.require(Action.SET_BUYER)
    with as_invalid():
        buyer = buyer_check(legal_name=legal_name, address=address, country=country, vat_id=vat_id)
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    team.legal_name, team.address = buyer.legal_name, buyer.address
    team.country, team.vat_id = buyer.country, buyer.vat_id
    team.save(update_fields=["legal_name", "address", "country", "vat_id"])
    # Details that pass (or none, a consumer's) close the review of the ones that did not.
    BuyerReview.objects.filter(team=team, resolved_at__isnull=True).update(resolved_at=db_now())
    return team


@transaction.atomic
def teams_buyer_recheck() -> dict[str, list[int]]:
    """Check every team's stored buyer details against today's rules (after an upgrade that
    changed them: `manage.py teams_buyer_recheck`): open a review for each team whose
    details no longer pass, with the treatment its quotes had and the one they get now, and
    close the open reviews of teams whose details pass again. Their next quote is taxed by
    the check whether or not this runs (accounts.buyer.team_tax_treatment); this tells staff.
    Returns {"opened": [team ids], "closed": [team ids]}."""
    now = db_now()
    open_reviews = set(
        BuyerReview.objects.filter(resolved_at__isnull=True).values_list("team_id", flat=True)
    )
    teams = (
        Team.objects.select_for_update()
        .filter(Q(pk__in=open_reviews) | ~Q(legal_name=""))
        .order_by("pk")
    )
    opened: list[int] = []
    closed: list[int] = []
    for team in teams:
        problems = buyer_problems(team)
        if problems and team.pk not in open_reviews:
            BuyerReview.objects.create(
                team=team, found_at=now, country=team.country, vat_id=team.vat_id,
                problem=_problem(problems), treatment_before=stored_tax_treatment(team),
                treatment_now=team_tax_treatment(team),
            )  # fmt: skip
            opened.append(team.pk)
        elif not problems and team.pk in open_reviews:
            closed.append(team.pk)
    BuyerReview.objects.filter(team_id__in=closed, resolved_at__isnull=True).update(resolved_at=now)
    return {"opened": opened, "closed": closed}


def _problem(problems: dict[str, str]) -> str:
    if "country" in problems:
        return BuyerProblem.COUNTRY
    return BuyerProblem.VAT_ID if "vat_id" in problems else BuyerProblem.DETAILS


class _Unset(enum.Enum):
    """A keyword left out: that setting stays as it is (None clears the spend limit)."""

    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET
BUYER_FIELDS = ("legal_name", "address", "country", "vat_id")


@transaction.atomic
def team_update(
    *,
    acting: Acting,
    monthly_spend_limit: Decimal | None | _Unset = _UNSET,
    require_second_factor: bool | _Unset = _UNSET,
    **buyer: str,
) -> Team:
    """Change what is given of the team's settings, all or nothing; buyer details given in
    part keep the others as they are."""
    team = acting.team
    if monthly_spend_limit is not _UNSET:
        team = team_spend_limit_set(acting=acting, limit=monthly_spend_limit)
    if require_second_factor is not _UNSET:
        team = team_second_factor_require(acting=acting, required=require_second_factor)
    if buyer:
        current = {field: getattr(team, field) for field in BUYER_FIELDS}
        team = team_buyer_set(acting=acting, **{**current, **buyer})
    return team


def invitations_waiting(*, team: Team) -> QuerySet[Invitation]:
    return Invitation.objects.filter(
        team=team, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    )


def teams_of(*, user: User) -> QuerySet[Membership]:
    """The user's teams with their role in each (personal first)."""
    return (
        Membership.objects.filter(user=user)
        .select_related("team")
        .order_by(F("team__personal_for").asc(nulls_last=True), "team__name")
    )
