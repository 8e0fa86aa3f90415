from django.contrib import admin

from webhooks.models import WebhookDelivery, WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "team", "is_active", "failing_since", "disabled_at", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["url", "team__name"]
    exclude = ["secret_sealed"]  # the customer saw it once; nobody reads it here
    readonly_fields = ["team", "created_by", "failing_since", "disabled_at"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["event_type", "endpoint", "status", "attempts", "response_code", "created_at"]
    list_filter = ["status", "event_type"]
    search_fields = ["message_id", "endpoint__url"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
