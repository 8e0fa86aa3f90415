"""Webhook endpoints a team registers, and each message's delivery to each endpoint."""

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from accounts.models import Team
from core.db import choices_check


class EventType(models.TextChoices):
    """The events a customer can subscribe to (Standard Webhooks `type`)."""

    BOOKING_CREATED = "booking.created", _("a booking was made")
    SCHEDULED = "allocation.scheduled", _("an allocation is booked to start later")
    STARTED = "allocation.started", _("an allocation started")
    STOPPED = "allocation.stopped", _("an allocation was stopped")
    EXPIRING = "allocation.expiring", _("an allocation ends within 24 hours or an hour")
    EXPIRED = "allocation.expired", _("an allocation's paid period ended")
    CANCELLED = "allocation.cancelled", _("an allocation was cancelled and refunded")
    EXTENDED = "allocation.extended", _("an allocation was extended")
    ACCESS_READY = "allocation.access_ready", _("the node lets the allocation's keys in")
    ACCESS_REVOKED = "allocation.access_revoked", _("the node took the allocation's access away")
    MAINTENANCE = (
        "allocation.maintenance",
        _("a maintenance window moved an allocation to other GPUs or cancelled it"),
    )
    MOVED = "allocation.moved", _("an allocation's GPUs were swapped for equivalent ones")
    IMPAIRED = "allocation.impaired", _("some of an allocation's GPUs cannot work")
    RECOVERED = "allocation.recovered", _("an impaired allocation's GPUs work again")


TEST_EVENT = "webhook.test"


class WebhookEndpoint(models.Model):
    """A team's receiver: where to send which events, signed with a secret shown once and
    kept sealed (`core.sealed`)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    events = ArrayField(models.CharField(max_length=40, choices=EventType.choices))
    secret_sealed = models.TextField(editable=False)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Failing since the first failed attempt after the last success; a day of that disables.
    failing_since = models.DateTimeField(null=True, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(events__len__gte=1), name="webhooks_endpoint_has_events"
            ),
            models.CheckConstraint(
                condition=Q(is_active=True, disabled_at__isnull=True) | Q(is_active=False),
                name="webhooks_endpoint_active_is_not_disabled",
            ),
        ]

    def __str__(self):
        return self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    SUCCEEDED = "succeeded", _("delivered")
    FAILED = "failed", _("failed, retries spent")


class WebhookDelivery(models.Model):
    """One message to one endpoint: its signed body is fixed at creation, so every attempt
    sends the same bytes with the same `webhook-id` (receivers de-duplicate on it)."""

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    message_id = models.CharField(max_length=80)
    event_type = models.CharField(max_length=40)
    payload = models.TextField(help_text="the JSON body, byte for byte as signed and sent")
    created_at = models.DateTimeField()
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "message_id"], name="webhooks_delivery_once_per_endpoint"
            ),
            choices_check("status", DeliveryStatus, name="webhooks_delivery_status_valid"),
            models.CheckConstraint(
                condition=Q(status=DeliveryStatus.SUCCEEDED, delivered_at__isnull=False)
                | (~Q(status=DeliveryStatus.SUCCEEDED) & Q(delivered_at__isnull=True)),
                name="webhooks_delivery_delivered_when_succeeded",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status=DeliveryStatus.PENDING),
                name="webhooks_delivery_due",
            ),
            models.Index(fields=["endpoint", "-created_at"], name="webhooks_delivery_log"),
        ]

    def __str__(self):
        return f"{self.event_type} → {self.endpoint_id} ({self.status})"
