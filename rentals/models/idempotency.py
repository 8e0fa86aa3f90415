"""Stored first responses to purchases, replayed for retries (rentals/idempotency.py)."""

from django.conf import settings
from django.db import models

from accounts.models import Team


class IdempotencyKey(models.Model):
    """The first response to (team, key), replayed for retries of the same request: two
    members of one team retrying the same purchase buy once."""

    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="+", db_index=False
    )  # found by the unique (team, key)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    content_type = models.CharField(max_length=100)
    location = models.CharField(max_length=500, blank=True)
    body = models.BinaryField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="rentals_idempotencykey_once"),
        ]
        indexes = [models.Index(fields=["created_at"], name="rentals_ide_created_d6673f_idx")]

    def __str__(self):
        return self.key
