"""The admin's maintenance windows: scheduled through the same service as the API
(`maintenance_create`), read-only once they exist."""

import uuid

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.roles import Operation, operator_can
from catalog.models import Gpu, Node, NodeState
from core.admin import ReadOnlyInline
from core.errors import DomainError, Invalid
from rentals.errors import ChoiceMissing
from rentals.models import AllocationGpu, MaintenanceWindow
from rentals.services.maintenance import Choice, maintenance_create


def _choices_read(text: str) -> list[dict]:
    """ "<allocation id> move" or "<allocation id> cancel", one per line."""
    chosen = []
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or parts[1] not in Choice.values:
            raise ValidationError(
                _("Line %(n)s: write an allocation id and move or cancel.") % {"n": number}
            )
        try:
            chosen.append({"allocation": uuid.UUID(parts[0]), "action": parts[1]})
        except ValueError as exc:
            raise ValidationError(
                _("Line %(n)s: %(id)s is not an allocation id.") % {"n": number, "id": parts[0]}
            ) from exc
    return chosen


class MaintenanceWindowForm(forms.ModelForm):
    nodes = forms.ModelMultipleChoiceField(
        queryset=Node.objects.exclude(state=NodeState.RETIRED).order_by("hostname"),
        required=False, label=gettext_lazy("Whole nodes"),
    )  # fmt: skip
    gpus = forms.ModelMultipleChoiceField(
        queryset=Gpu.objects.select_related("node")
        .exclude(node__state=NodeState.RETIRED)
        .order_by("node__hostname", "index"),
        required=False, label=gettext_lazy("Single GPUs"),
    )  # fmt: skip
    choices = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}),
        label=gettext_lazy("Bookings in the way"),
        help_text=gettext_lazy(
            "One line per booking in the window's way: its id, then move (equivalent GPUs, "
            "the same paid period and price) or cancel (a full refund, before its start). "
            "Saving without them lists them."
        ),
    )  # fmt: skip

    class Meta:
        model = MaintenanceWindow
        fields = ["starts_at", "ends_at", "reason"]

    def __init__(self, *args, operator=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.operator = operator
        self.window = None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            self.window = maintenance_create(
                operator=self.operator,
                nodes=[n.hostname for n in data.get("nodes") or []],
                gpus=[g.uuid for g in data.get("gpus") or []],
                starts_at=data.get("starts_at"), ends_at=data.get("ends_at"),
                reason=data.get("reason"), affected=_choices_read(data.get("choices")),
            )  # fmt: skip
        except ChoiceMissing as exc:
            listed = "; ".join(
                f"{a['allocation']} ({a['owner']}, {a['state']}, {a['node']}): "
                + " / ".join(a["choices"])
                for a in exc.affected
            )
            raise ValidationError({"choices": f"{exc.detail} {listed}"}) from exc
        except Invalid as exc:
            known = set(self.fields) | {"gpus"}
            raise ValidationError(
                {k if k in known else None: v for k, v in exc.errors.items()}
            ) from exc
        except DomainError as exc:
            raise ValidationError(exc.detail) from exc
        return data


class WindowGpuInline(ReadOnlyInline):
    model = AllocationGpu
    fk_name = "maintenance"
    fields = readonly_fields = ("gpu", "starts_at", "ends_at")


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    """Scheduled here or with POST /api/v1/maintenance/, by staff with the permission;
    never edited afterwards (a window's holdings and the moves it made stand)."""

    form = MaintenanceWindowForm
    list_display = ["starts_at", "ends_at", "reason", "created_by", "created_at"]
    search_fields = ["reason", "held__gpu__node__hostname"]
    inlines = [WindowGpuInline]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)

        class WithOperator(form):
            def __init__(self, *args, **inner):
                super().__init__(*args, operator=request.user, **inner)

        return WithOperator

    def get_fields(self, request, obj=None):
        if obj is not None:
            return ["starts_at", "ends_at", "reason", "created_by", "created_at"]
        return ["nodes", "gpus", "starts_at", "ends_at", "reason", "choices"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj) if obj is not None else []

    def has_add_permission(self, request):
        return operator_can(request.user, Operation.MAINTAIN)

    def has_change_permission(self, request, obj=None):
        return obj is None and self.has_add_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff

    def save_model(self, request, obj, form, change):
        """The service wrote the window when the form was checked: this is it."""
        obj.pk = form.window.pk
        obj.created_by, obj.created_at = form.window.created_by, form.window.created_at
        obj.starts_at, obj.ends_at = form.window.starts_at, form.window.ends_at
