"""Teams: creating them, inviting colleagues, roles, removing members, the spend limit.

A team always keeps an owner: the services refuse to remove or demote the last one, and a
deferred database trigger (accounts 0007) refuses it whatever path writes the rows.
"""

import logging
import secrets
from datetime import timedelta
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.access import Acting, Action
from accounts.models import Invitation, Membership, Role, SpendLimitChange, Team, token_hash
from core.errors import Conflict, DomainError
from core.money import amount_check, default_currency

logger = logging.getLogger(__name__)
INVITATION_LIFETIME = timedelta(days=7)


class LastOwner(Conflict):
    code = "last_owner"
    title = gettext_lazy("A team needs an owner")


class InvitationInvalid(DomainError):
    code = "invitation_invalid"
    title = gettext_lazy("This invitation cannot be used")


@transaction.atomic
def team_create(*, user, name: str) -> Team:
    team = Team.objects.create(name=name)
    Membership.objects.create(team=team, user=user, role=Role.OWNER)
    return team


@transaction.atomic
def invitation_create(
    *, acting: Acting, email: str, role: str, accept_url
) -> tuple[Invitation, str]:
    """An invitation and its secret (shown once, and mailed after commit)."""
    acting.require(Action.MANAGE_TEAM)
    secret = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        team=acting.team,
        email=email,
        role=Role(role),
        key_hash=token_hash(secret),
        invited_by=acting.user,
        expires_at=timezone.now() + INVITATION_LIFETIME,
    )
    link = accept_url(secret)
    team_name, inviter = acting.team.name, acting.user.get_username()

    def mail():
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


def invitation_find(*, secret: str) -> Invitation:
    invitation = (
        Invitation.objects.select_related("team")
        .filter(
            key_hash=token_hash(secret or ""), accepted_at__isnull=True, revoked_at__isnull=True
        )
        .first()
    )
    if invitation is None or invitation.expires_at <= timezone.now():
        raise InvitationInvalid(_("This invitation was used, revoked or has expired."))
    return invitation


@transaction.atomic
def invitation_accept(*, user, secret: str) -> Membership:
    invitation = invitation_find(secret=secret)
    Invitation.objects.select_for_update().filter(pk=invitation.pk).first()
    membership, created = Membership.objects.get_or_create(
        team=invitation.team, user=user, defaults={"role": invitation.role}
    )
    Invitation.objects.filter(pk=invitation.pk).update(accepted_at=timezone.now(), accepted_by=user)
    return membership


def _owners_left(team: Team, *, without: Membership) -> int:
    return Membership.objects.filter(team=team, role=Role.OWNER).exclude(pk=without.pk).count()


@transaction.atomic
def membership_role_set(*, acting: Acting, membership: Membership, role: str) -> Membership:
    acting.require(Action.MANAGE_TEAM)
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
    """An owner removes anyone; anyone may leave (remove themselves)."""
    if membership.user_id != acting.user.pk:
        acting.require(Action.MANAGE_TEAM)
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    membership = Membership.objects.select_for_update().get(pk=membership.pk, team=team)
    if team.personal_for_id == membership.user_id:
        raise LastOwner(_("Nobody leaves their personal team."))
    if membership.role == Role.OWNER and not _owners_left(team, without=membership):
        raise LastOwner(_("Make someone else owner before the last owner leaves."))
    membership.delete()


@transaction.atomic
def team_spend_limit_set(*, acting: Acting, limit: Decimal | None) -> Team:
    """Set (or clear, with None) the team's monthly spend limit; the change is recorded."""
    acting.require(Action.MANAGE_TEAM)
    try:
        amount_check(limit, default_currency())
    except ValidationError as exc:
        raise ValidationError({"monthly_spend_limit": exc.messages}) from exc
    team = Team.objects.select_for_update().get(pk=acting.team.pk)
    SpendLimitChange.objects.create(
        team=team, by=acting.user, old_limit=team.monthly_spend_limit, new_limit=limit
    )
    team.monthly_spend_limit = limit
    team.full_clean()
    team.save(update_fields=["monthly_spend_limit"])
    return team


def teams_of(*, user):
    """The user's teams with their role in each (personal first)."""
    return (
        Membership.objects.filter(user=user)
        .select_related("team")
        .order_by(F("team__personal_for").asc(nulls_last=True), "team__name")
    )
