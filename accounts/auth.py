"""Bearer-token authentication for the API."""

from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions

from accounts.models import ApiToken, token_hash


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid Authorization header."))
        try:
            raw = header[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from exc
        token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=token_hash(raw), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked token."))
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword
