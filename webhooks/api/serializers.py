from rest_framework import serializers

from webhooks.models import EventType, WebhookDelivery, WebhookEndpoint


class EndpointSerializer(serializers.ModelSerializer):
    team = serializers.IntegerField(source="team_id", read_only=True)
    events = serializers.ListField(child=serializers.ChoiceField(choices=EventType.choices))

    class Meta:
        model = WebhookEndpoint
        fields = [
            "id", "team", "url", "description", "events", "is_active", "created_at",
            "failing_since", "disabled_at",
        ]  # fmt: skip
        read_only_fields = fields


class EndpointCreatedSerializer(EndpointSerializer):
    secret = serializers.CharField(
        help_text="The signing secret (Standard Webhooks `whsec_…`), shown only in this answer"
    )

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class EndpointInSerializer(serializers.Serializer):
    url = serializers.URLField(max_length=500, help_text="https, to a public address")
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices), min_length=1, max_length=20
    )
    description = serializers.CharField(
        max_length=200, required=False, default="", allow_blank=True
    )


class EndpointChangeSerializer(serializers.Serializer):
    url = serializers.URLField(max_length=500, required=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices),
        min_length=1,
        max_length=20,
        required=False,
    )
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    is_active = serializers.BooleanField(
        required=False, help_text="false disables; true enables again (a fresh start)"
    )


class DeliverySerializer(serializers.ModelSerializer):
    webhook_id = serializers.CharField(source="message_id")

    class Meta:
        model = WebhookDelivery
        fields = [
            "id", "webhook_id", "event_type", "status", "attempts", "response_code",
            "last_error", "created_at", "last_attempt_at", "next_attempt_at", "delivered_at",
        ]  # fmt: skip
        read_only_fields = fields
