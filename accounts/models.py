"""Personal API tokens."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A personal API token. Only its SHA-256 is stored; the user sees the secret once."""

    PREFIX = "agpu_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=80)
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def new_secret(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)
