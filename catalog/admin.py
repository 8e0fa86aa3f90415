"""Catalog admin: models with price history, options, fleet with CSV import.

Prices are append-only: a change is a new row (now or scheduled) made through the same
service as everywhere else, and only users with `catalog.change_prices` may add one.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminSplitDateTime
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _
from translated_fields import TranslatedFieldAdmin

from catalog.models import (
    Gpu,
    GpuModel,
    GpuPrice,
    Node,
    Option,
    OptionPrice,
    PriceChange,
    Region,
)
from catalog.selectors import price_rows_with_status, price_status
from catalog.services import fleet_import, gpu_price_set, option_price_set, price_start_check
from catalog.software import node_driver_disagrees
from core.admin import ReadOnlyAdmin, ReadOnlyInline, when_column
from core.dates import when_text
from core.errors import Invalid
from core.money import money_text


@admin.display(description=_("unit price"), ordering="unit_price")
def price(obj):
    """A price as money reads: "1,026.00 USD", in the admin's language."""
    return money_text(obj.unit_price, obj.currency)


# Times in the admin's time zone, named ("Dec. 5, 2026, 10 a.m. CET"), as the pages show them.
effective_from = when_column("effective_from", _("effective from"))
created_at = when_column("created_at", _("created at"))


class GpuPriceHistoryInline(ReadOnlyInline):
    model = GpuPrice
    # Django shows callables in `fields` that are read-only too; the stubs allow only names.
    fields = ["period", price, effective_from, "created_by", created_at]  # type: ignore[list-item]
    readonly_fields = fields  # type: ignore[assignment]
    ordering = ["period__duration", "-effective_from"]
    verbose_name_plural = _("price history and scheduled changes")


class PricesAtForm(forms.Form):
    at = forms.DateTimeField(
        required=False, label=_("At"), help_text=_("In your time zone (account page).")
    )


class LabelledSplitDateTime(AdminSplitDateTime):
    """The admin's date and time pickers, each input named for a screen reader."""

    def __init__(self, attrs=None):
        super().__init__(attrs)
        self.widgets[0].attrs["aria-label"] = _("date")
        self.widgets[1].attrs["aria-label"] = _("time")


class PriceForm(forms.ModelForm):
    effective_from = forms.SplitDateTimeField(
        label=_("effective from"), required=False, widget=LabelledSplitDateTime,
        help_text=_("In your time zone (account page). Empty: now. A future time schedules "
                    "the change; never a past one."),
    )  # fmt: skip

    def clean_effective_from(self):
        value = self.cleaned_data.get("effective_from")
        return price_start_check(value) if value else None


class PriceAdmin(admin.ModelAdmin):
    """What both price admins share. Append-only prices: add through the service, never edit
    or delete. The list marks each row past, current or upcoming; "Prices at a time" shows
    what was (or will be) in force at any instant."""

    form = PriceForm
    list_filter = ["currency"]
    date_hierarchy = "effective_from"
    change_list_template = "admin/catalog/price_change_list.html"

    def get_queryset(self, request):
        return price_rows_with_status(super().get_queryset(request), at=timezone.now())

    @admin.display(description=_("status"))
    def status(self, obj):
        return price_status(obj, at=timezone.now())

    def get_urls(self):
        info = self.model._meta.app_label, self.model._meta.model_name
        return [
            path(
                "at/",
                self.admin_site.admin_view(self.prices_at_view),
                name=f"{info[0]}_{info[1]}_at",
            ),
            *super().get_urls(),
        ]

    def prices_at_view(self, request):
        form = PricesAtForm(request.GET or None)
        at = form.cleaned_data["at"] if form.is_valid() and form.cleaned_data["at"] else None
        at = at or timezone.now()
        rows = price_rows_with_status(self.model.objects.filter(effective_from__lte=at), at=at)
        in_force = [row for row in rows.order_by("-effective_from") if not row.superseded]
        context = {
            **self.admin_site.each_context(request),
            "title": _("%(prices)s in force at %(at)s")
            % {"prices": self.model._meta.verbose_name_plural, "at": when_text(at)},
            "form": form,
            "rows": in_force,
            "opts": self.model._meta,
        }
        return render(request, "admin/catalog/prices_at.html", context)

    def has_add_permission(self, request):
        return request.user.has_perm("catalog.change_prices")

    def has_change_permission(self, request, obj=None):
        return obj is None and request.user.has_perm("catalog.change_prices")

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields] if obj else ["currency"]


@admin.register(GpuPrice)
class GpuPriceAdmin(PriceAdmin):
    list_display = [
        "gpu_model", "period", price, effective_from, "status", "created_by"
    ]  # fmt: skip
    list_filter = ["gpu_model", "period", "currency"]
    fields = ["gpu_model", "period", "unit_price", "effective_from"]

    def save_model(self, request, obj, form, change):
        saved = gpu_price_set(
            gpu_model=obj.gpu_model,
            period=obj.period,
            unit_price=obj.unit_price,
            effective_from=form.cleaned_data.get("effective_from"),
            user=request.user,
        )
        obj.pk = saved.pk


@admin.register(OptionPrice)
class OptionPriceAdmin(PriceAdmin):
    list_display = [
        "option", "period", price, effective_from, "status", "created_by"
    ]  # fmt: skip
    list_filter = ["option", "period"]
    fields = ["option", "period", "unit_price", "effective_from"]

    def save_model(self, request, obj, form, change):
        saved = option_price_set(
            option=obj.option,
            period=obj.period,
            unit_price=obj.unit_price,
            effective_from=form.cleaned_data.get("effective_from"),
            user=request.user,
        )
        obj.pk = saved.pk


@admin.register(GpuModel)
class GpuModelAdmin(TranslatedFieldAdmin, admin.ModelAdmin):
    list_display = ["name", "vendor", "memory_gb", "vcpus_per_gpu", "ram_gib_per_gpu", "stack",
                    "compute_target", "fp8", "is_active"]  # fmt: skip
    list_filter = ["vendor", "stack", "fp8", "is_active"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [GpuPriceHistoryInline]


class OptionPriceHistoryInline(ReadOnlyInline):
    model = OptionPrice
    # Django shows callables in `fields` that are read-only too; the stubs allow only names.
    fields = ["period", price, effective_from, "created_by"]  # type: ignore[list-item]
    readonly_fields = fields  # type: ignore[assignment]


@admin.register(Option)
class OptionAdmin(TranslatedFieldAdmin, admin.ModelAdmin):
    list_display = [
        "name_en", "name_pl", "billing", "unit_en", "max_quantity", "input_label_en",
        "lead_time", "is_active",
    ]  # fmt: skip
    list_filter = ["billing", "is_active"]
    search_fields = ["name_en", "name_pl", "slug"]
    filter_horizontal = ["gpu_models"]
    inlines = [OptionPriceHistoryInline]


@admin.register(PriceChange)
class PriceChangeAdmin(ReadOnlyAdmin):
    list_display = [
        when_column("at", _("at")), "user", "subject", "old_price", "new_price", effective_from
    ]  # fmt: skip
    list_filter = ["user"]
    search_fields = ["subject"]


@admin.register(Region)
class RegionAdmin(TranslatedFieldAdmin, admin.ModelAdmin):
    list_display = ["name_en", "name_pl", "slug"]


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0


class FleetImportForm(forms.Form):
    file = forms.FileField(
        help_text="CSV: hostname,region,gpu_model,telemetry_url,exporter,gpu_ids[,state]"
    )


class NetworkGroupFilter(admin.AllValuesFieldListFilter):
    """Network groups by name; the nodes in none (an empty value) said in words."""

    def choices(self, changelist):
        for choice in super().choices(changelist):
            yield choice | {"display": choice["display"] or _("none (a node on its own)")}


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = [
        "hostname",
        "region",
        "gpu_model",
        "network_group",
        "exporter",
        "state",
        "health",
        "driver_version",
        "cuda_version",
        "rocm_version",
        "last_good_poll_at",
    ]
    list_filter = [
        "state", "health", "region", "gpu_model", "exporter", ("network_group", NetworkGroupFilter)
    ]  # fmt: skip
    search_fields = ["hostname", "gpus__uuid"]
    inlines = [GpuInline]
    readonly_fields = [
        "health", "health_detail", "last_poll_at", "last_good_poll_at", "driver_version",
        "cuda_version", "rocm_version", "software_stack",
    ]  # fmt: skip
    change_list_template = "admin/catalog/node/change_list.html"

    @admin.display(description="software stack")
    def software_stack(self, node):
        """What the node's agent reported, and the exporter's driver where it disagrees."""
        stack = node.software or {}
        if not node.software_reported_at:
            return "unknown (no agent has reported this node's stack)"
        gpus = ", ".join(
            f"#{g.get('index')} {g.get('name') or ''} "
            f"{g.get('compute_cap') or g.get('gfx_target') or 'unknown'}".strip()
            for g in stack.get("gpus", [])
        )
        lines = [
            ("driver", node.driver_version or "unknown"),
            ("CUDA (driver's highest)", node.cuda_version or "unknown"),
            ("ROCm", node.rocm_version or "unknown"),
            ("OS", stack.get("os") or "unknown"),
            ("kernel", stack.get("kernel") or "unknown"),
            ("GPUs", gpus or "unknown"),
            ("reported", f"{node.software_reported_at:%Y-%m-%d %H:%M} UTC"),
        ]
        if node.exporter_driver_version:
            lines.append(("exporter's driver label", node.exporter_driver_version))
        if node_driver_disagrees(node):
            lines.append(("disagreement", "the exporter names another driver; the agent's wins"))
        return format_html_join(mark_safe("<br>"), "{}: {}", lines)

    def get_urls(self):
        return [
            path(
                "import/", self.admin_site.admin_view(self.import_view), name="catalog_node_import"
            ),
            *super().get_urls(),
        ]

    def import_view(self, request):
        if not request.user.has_perm("catalog.add_node"):
            messages.error(request, "You may not add nodes.")
            return redirect("admin:catalog_node_changelist")
        form = FleetImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            try:
                text = form.cleaned_data["file"].read().decode("utf-8")
                result = fleet_import(text=text)
            except (UnicodeDecodeError, Invalid) as exc:
                for message in getattr(exc, "messages", [str(exc)]):
                    messages.error(request, message)
            else:
                messages.success(
                    request,
                    f"{result['created']} nodes created, {result['updated']} updated, "
                    f"{result['gpus']} GPUs.",
                )
                return redirect("admin:catalog_node_changelist")
        context = {**self.admin_site.each_context(request), "form": form, "title": "Import fleet"}
        return render(request, "admin/catalog/node/import.html", context)
