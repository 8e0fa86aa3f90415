"""The compatibility reference in the admin: staff add a release that came out since the
shipped table (a CUDA toolkit, a framework build, a ROCm release) without a deploy. What
they save is theirs (origin "added by staff") and no later shipped table overwrites it."""

from django.contrib import admin

from sizing.compat_reference import reference_row_save_by_staff
from sizing.models import CudaToolkit, FrameworkBuild, RocmRelease


class ReferenceAdmin(admin.ModelAdmin):
    list_filter = ["origin"]
    readonly_fields = ["origin"]

    def save_model(self, request, obj, form, change):
        reference_row_save_by_staff(obj)


@admin.register(CudaToolkit)
class CudaToolkitAdmin(ReferenceAdmin):
    list_display = ["version", "driver_min", "source", "read_on", "origin"]
    search_fields = ["version", "driver_min"]


@admin.register(FrameworkBuild)
class FrameworkBuildAdmin(ReferenceAdmin):
    list_display = [
        "framework", "version", "build", "stack", "toolkit", "archs", "ptx", "min_compute",
        "source", "read_on", "origin",
    ]  # fmt: skip
    list_filter = ["framework", "stack", "origin"]
    search_fields = ["version", "build"]


@admin.register(RocmRelease)
class RocmReleaseAdmin(ReferenceAdmin):
    list_display = ["version", "gfx_targets", "source", "read_on", "origin"]
