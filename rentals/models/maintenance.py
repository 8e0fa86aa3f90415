"""Maintenance windows: the provider's own time on nodes or single GPUs."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class MaintenanceWindow(models.Model):  # type: ignore[django-manager-missing]
    """Planned provider time on nodes or single GPUs, [starts_at, ends_at): one holding per
    GPU (an `AllocationGpu` with no allocation), under the exclusion constraint that guards
    bookings, so a booking and a window never hold a GPU at once, whoever commits first.
    Created only by `maintenance_create`, which moves or cancels the bookings in its way."""

    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.CharField(max_length=300, help_text="shown to the customers it moves")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(starts_at__lt=F("ends_at")),
                name="rentals_maintenancewindow_not_empty",
            ),
        ]
        permissions = [("schedule_maintenance", "Can schedule maintenance windows")]

    def __str__(self):
        return f"maintenance {self.starts_at:%Y-%m-%d %H:%M} – {self.ends_at:%Y-%m-%d %H:%M} UTC"
