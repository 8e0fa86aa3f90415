from django.contrib import admin

from core.admin import ReadOnlyAdmin
from telemetry.models import Flag


@admin.register(Flag)
class FlagAdmin(ReadOnlyAdmin):
    list_display = ["gpu", "kind", "detail", "opened_at", "closed_at"]
    list_filter = ["kind"]
