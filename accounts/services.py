"""Personal API tokens: created (the secret shown once), listed and revoked by their owner."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.models import ApiToken, token_hash
from core.errors import Conflict


class TooManyTokens(Conflict):
    code = "too_many_tokens"
    title = gettext_lazy("Too many API tokens")


def api_tokens_live(*, user):
    """The user's tokens that still work: not revoked, not expired."""
    return ApiToken.objects.filter(
        user=user, revoked_at__isnull=True, expires_at__gt=timezone.now()
    )


@transaction.atomic
def api_token_create(*, user, name: str) -> str:
    """A new token; the secret is returned once and never stored. At most API_TOKENS_MAX
    live tokens per user (the user row is locked, so parallel requests cannot pass it)."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    limit = settings.ANCHORGPU["API_TOKENS_MAX"]
    if api_tokens_live(user=user).count() >= limit:
        raise TooManyTokens(
            _("You have %(n)s live API tokens, the most allowed; revoke one first.") % {"n": limit}
        )
    secret = ApiToken.new_secret()
    ApiToken.objects.create(
        user=user,
        name=name,
        key_hash=token_hash(secret),
        hint=secret[:9],
        expires_at=timezone.now() + settings.ANCHORGPU["API_TOKEN_LIFETIME"],
        password_stamp=user.get_session_auth_hash(),
    )
    return secret


def api_token_revoke(*, user, pk: int) -> bool:
    return bool(
        ApiToken.objects.filter(user=user, pk=pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )
