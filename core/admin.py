"""Admin parts every app shares: records that are read in the admin, never written there."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Listed and searchable; written only by services (money, audit trails, telemetry)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False
