from django.contrib import admin

from core.admin import ReadOnlyAdmin
from telemetry.models import Flag


@admin.register(Flag)
class FlagAdmin(ReadOnlyAdmin):
    list_display = [
        "node", "gpu", "kind", "severity", "detail", "opened_at", "last_seen_at", "closed_at",
        "acknowledged_by",
    ]  # fmt: skip
    list_filter = ["kind", "severity"]
    list_select_related = ["node", "gpu", "acknowledged_by"]
