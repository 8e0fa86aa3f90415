"""Personal API tokens: created (the secret shown once), listed and revoked by their owner;
a person's preferences; the confirmation link sent again."""

from datetime import datetime

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.utils.translation import gettext as _

from accounts.access import ALLOWED, acting_as
from accounts.errors import NotAllowed, TooManyTokens, TooSoon
from accounts.models import ApiToken, Profile, Role, Team, token_hash
from core.db import db_now


def api_tokens_live(*, user, now: datetime):
    """The user's tokens that still work at `now`: not revoked, not expired."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True, expires_at__gt=now)


@transaction.atomic
def api_token_create(*, user, name: str, team: Team | None = None, role: str | None = None) -> str:
    """A new token acting for one team in one role (default: the personal team, the user's
    role there); it can never do more than the user's role allows. The secret is returned
    once and never stored. At most API_TOKENS_MAX live tokens per user (the user row is
    locked, so parallel requests cannot pass it)."""
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
    secret = ApiToken.new_secret()
    ApiToken.objects.create(
        user=user,
        name=name,
        key_hash=token_hash(secret),
        hint=secret[:9],
        expires_at=now + settings.ANCHORGPU["API_TOKEN_LIFETIME"],
        password_stamp=user.get_session_auth_hash(),
        team=acting.team,
        role=role,
    )
    return secret


def api_token_revoke(*, user, pk: int) -> bool:
    return bool(
        ApiToken.objects.filter(user=user, pk=pk, revoked_at__isnull=True).update(
            revoked_at=db_now()
        )
    )


_UNSET = object()


@transaction.atomic
def account_preferences_set(
    *, user, first_name=_UNSET, last_name=_UNSET, language=_UNSET, time_zone=_UNSET
) -> Profile:
    """Change what is given of the person's name and preferences."""
    profile = Profile.objects.select_for_update().get_or_create(user=user)[0]
    for field, value in (("language", language), ("time_zone", time_zone)):
        if value is not _UNSET:
            setattr(profile, field, value)
    profile.full_clean()
    profile.save()
    names = {
        k: v for k, v in (("first_name", first_name), ("last_name", last_name)) if v is not _UNSET
    }
    if names:
        get_user_model().objects.filter(pk=user.pk).update(**names)
    return profile


CONFIRMATION_RESEND_SECONDS = 180


def email_confirmation_resend(*, request, email: str) -> None:
    """Send the link that confirms an address again, for someone who signed up and has no
    mail (the "check your inbox" page). At most once per address every three minutes,
    counted in Redis before anything is looked up, and the answer is the same whether or
    not an unconfirmed account uses the address: nobody learns who has an account here.
    The mail is allauth's own confirmation (the request builds its link)."""
    email = (email or "").strip()
    key = f"confirmation-resend:{email.lower()[:254]}"
    if not cache.strict.add(key, 1, CONFIRMATION_RESEND_SECONDS):
        raise TooSoon(
            _("A link to %(email)s was asked for less than three minutes ago: look for it, in "
              "the spam folder too, before asking again.") % {"email": email}
        )  # fmt: skip
    address = (
        EmailAddress.objects.filter(email__iexact=email, verified=False)
        .select_related("user")
        .order_by("-primary", "pk")
        .first()
    )
    if address is not None and address.user.is_active:
        address.send_confirmation(request, signup=False)
