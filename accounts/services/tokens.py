"""Personal API tokens: created (the secret shown once), exchanged, listed and revoked by
their owner."""

from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from accounts.errors import NotAllowed, TooManyTokens
from accounts.models import ApiToken, Role, Team, token_hash
from accounts.roles import ALLOWED, acting_as
from core.db import db_now


def api_tokens_live(*, user: User, now: datetime) -> QuerySet[ApiToken]:
    """The user's tokens that still work at `now`: not revoked, not expired."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True, expires_at__gt=now)


@transaction.atomic
def api_token_create(
    *,
    user: User,
    name: str,
    team: Team | None = None,
    role: str | None = None,
    expires_at: datetime | None = None,
) -> str:
    """A new token acting for one team in one role (default: the personal team, the user's
    role there); it can never do more than the user's role allows. The secret is returned
    once and never stored. At most API_TOKENS_MAX live tokens per user (the user row is
    locked, so parallel requests cannot pass it). It lives API_TOKEN_LIFETIME, or less
    where `expires_at` is sooner."""
    acting = acting_as(user, team)
    role = role or acting.role
    if not ALLOWED[Role(role)] <= acting.allowed:
        raise NotAllowed(
            _("A token cannot do more than your role in %(team)s allows.")
            % {"team": acting.team.name}
        )
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    now = db_now()
    limit = settings.ANCHORGPU["API_TOKENS_MAX"]
    if api_tokens_live(user=user, now=now).count() >= limit:
        raise TooManyTokens(
            _("You have %(n)s live API tokens, the most allowed; revoke one first.") % {"n": limit}
        )
    lifetime_end = now + settings.ANCHORGPU["API_TOKEN_LIFETIME"]
    secret = ApiToken.new_secret()
    ApiToken.objects.create(
        user=user,
        name=name,
        key_hash=token_hash(secret),
        hint=secret[:9],
        expires_at=lifetime_end if expires_at is None else min(lifetime_end, expires_at),
        password_stamp=user.get_session_auth_hash(),
        team=acting.team,
        role=role,
    )
    return secret


@transaction.atomic
def api_token_exchange(
    *, token: ApiToken, team: Team, role: str | None = None, name: str | None = None
) -> str:
    """Give up a live token for a new one acting for another of the same user's teams (a
    command line switching teams without asking for the password and second factor again).
    The new token does no more than the user's role in that team allows, and never more than
    the token given up could (its role's actions), and it dies when that token would have:
    an exchange never widens or prolongs a credential. The old token is revoked in the same
    transaction (its row locked), so one token is exchanged once."""
    now = db_now()
    live = (
        ApiToken.objects.select_for_update()
        .filter(pk=token.pk, revoked_at__isnull=True, expires_at__gt=now)
        .first()
    )
    if live is None:
        raise NotAllowed(_("This token was revoked or has expired: sign in again."))
    member_role = acting_as(live.user, team).role
    could = ALLOWED[Role(live.role)]
    if role is None:
        # The user's role there, or, where that does more than this token could, the
        # token's own role, if the user's role there allows all of it.
        both = could & ALLOWED[Role(member_role)]
        candidates = (member_role, live.role)
        role = next((r for r in candidates if ALLOWED[Role(r)] <= both), None)
        if role is None:
            raise NotAllowed(
                _("A token acting as %(role)s cannot become one acting for %(team)s: choose a "
                  "role that both allow, or sign in again.")
                % {"role": Role(live.role).label, "team": team.name},
                field="role",
            )  # fmt: skip
    elif not ALLOWED[Role(role)] <= could:
        raise NotAllowed(
            _("A token acting as %(role)s cannot become one that does more: sign in again "
              "for that.") % {"role": Role(live.role).label},
            field="role",
        )  # fmt: skip
    ApiToken.objects.filter(pk=live.pk).update(revoked_at=now)
    return api_token_create(
        user=live.user, name=name or live.name, team=team, role=role, expires_at=live.expires_at
    )


def api_token_revoke(*, user: User, pk: int) -> bool:
    return bool(
        ApiToken.objects.filter(user=user, pk=pk, revoked_at__isnull=True).update(
            revoked_at=db_now()
        )
    )
