"""Personal API tokens."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A personal API token. Only its SHA-256 is stored; the user sees the secret once.

    It expires, and it dies with the password it was issued under: `password_stamp` is the
    user's session auth hash at issue, which changes whenever the password does.
    """

    PREFIX = "agpu_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=80)
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    password_stamp = models.CharField(max_length=128)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "revoked_at"], name="accounts_token_user_live")]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def new_secret(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)
