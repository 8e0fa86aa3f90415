"""Personal API tokens: created (the secret shown once) and revoked by their owner."""

from django.utils import timezone

from accounts.models import ApiToken, token_hash


def api_token_create(*, user, name: str) -> str:
    secret = ApiToken.new_secret()
    ApiToken.objects.create(user=user, name=name, key_hash=token_hash(secret), hint=secret[:9])
    return secret


def api_token_revoke(*, user, pk) -> bool:
    return bool(
        ApiToken.objects.filter(user=user, pk=pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    )
