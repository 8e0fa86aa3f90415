"""Bearer-token authentication for the API: live tokens only (not revoked, not expired, and
issued under the user's current password)."""

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import authentication, exceptions

from accounts import sql
from accounts.models import ApiToken, token_hash
from core.authentication import authorization_credential

INVALID = gettext_lazy("Invalid token.")


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        raw = authorization_credential(request, self.keyword, invalid=INVALID)
        if raw is None:
            return None
        now = timezone.now()
        with connection.cursor() as cursor:  # live, by its hash, with its user and team
            cursor.execute(sql.TOKEN, {"hash": token_hash(raw), "now": now})
            row = cursor.fetchone()
        token = None if row is None else sql.TOKEN_ROW.build(row)
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid, expired or revoked token."))
        if not _stamp_holds(token):
            # Issued under a password the user no longer has: dead for good.
            ApiToken.objects.filter(pk=token.pk).update(revoked_at=now)
            raise exceptions.AuthenticationFailed(_("Invalid, expired or revoked token."))
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


def _stamp_holds(token: ApiToken) -> bool:
    """The token was issued under the user's current password. The stamp is keyed by
    SECRET_KEY: one made under a key now in SECRET_KEY_FALLBACKS holds too, and is made
    again under the current key (as Django does for sessions), so a rotation ends no token."""
    user = token.user
    current = user.get_session_auth_hash()
    if constant_time_compare(token.password_stamp, current):
        return True
    for key in settings.SECRET_KEY_FALLBACKS:
        # Django's own (the stubs leave it out): the hash under another key.
        stamp = user._get_session_auth_hash(secret=key)  # type: ignore[attr-defined]
        if constant_time_compare(token.password_stamp, stamp):
            ApiToken.objects.filter(pk=token.pk).update(password_stamp=current)
            return True
    return False
