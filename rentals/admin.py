"""Rentals admin: read-mostly. Money and paid periods are never edited here; state changes
go through the same services as the API (admin actions)."""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from translated_fields import TranslatedFieldAdmin

from accounts.roles import Operation, operator_acting, operator_can
from catalog.models import RentalPeriod
from core.admin import ReadOnlyAdmin, ReadOnlyInline
from core.errors import DomainError
from rentals import services
from rentals.models import Allocation, AllocationEvent, LedgerEntry, Notice, Quote, QuoteLine
from rentals.texts import ledger_entry_text, quote_line_text


@admin.register(RentalPeriod)
class RentalPeriodAdmin(TranslatedFieldAdmin, admin.ModelAdmin):
    """Registered here, not in catalog: whether a period is in use is a rentals fact."""

    list_display = ["name_en", "name_pl", "slug", "duration", "is_active"]

    def get_readonly_fields(self, request, obj=None):
        if obj and Quote.objects.filter(period=obj).exists():
            return ["duration"]  # quoted or sold: its length is part of a contract
        return []


class QuoteLineInline(ReadOnlyInline):
    model = QuoteLine
    fields = readonly_fields = ("kind", "description", "quantity", "unit_price", "amount")

    @admin.display(description=_("description"))
    def description(self, line):
        return quote_line_text(line)


@admin.register(Quote)
class QuoteAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "user",
        "gpu_model",
        "gpu_count",
        "period",
        "period_count",
        "total",
        "created_at",
    ]
    list_filter = ["gpu_model", "period"]
    search_fields = ["user__username", "id"]
    inlines = [QuoteLineInline]


class EventInline(ReadOnlyInline):
    model = AllocationEvent
    fields = readonly_fields = ("at", "kind", "from_state", "to_state", "actor", "note")


@admin.register(Allocation)
class AllocationAdmin(ReadOnlyAdmin):
    list_display = [
        "reference",
        "user",
        "gpu_model",
        "gpu_count",
        "node",
        "state",
        "paid_from",
        "paid_until",
        "impaired_since",
    ]
    list_filter = [
        "state",
        "gpu_model",
        "node__region",
        ("impaired_since", admin.EmptyFieldListFilter),
    ]
    search_fields = ["user__username", "node__hostname", "id"]
    inlines = [EventInline]

    @admin.display(description=_("allocation"), ordering="id")
    def reference(self, allocation):
        return str(allocation.pk)[:8]

    actions = ["stop_selected", "start_selected", "replace_selected"]

    def _apply(self, request, queryset, service, done_text):
        done = 0
        for allocation in queryset:
            try:
                service(
                    acting=operator_acting(request.user, allocation.team), allocation=allocation
                )
                done += 1
            except DomainError as exc:
                messages.warning(request, f"{allocation.pk}: {exc.detail}")
        messages.info(request, done_text(done) % {"n": done})

    @admin.action(description=_("Stop (the paid period keeps running)"), permissions=["operate"])
    def stop_selected(self, request, queryset):
        self._apply(
            request, queryset, services.allocation_stop,
            lambda n: ngettext("%(n)s allocation stopped.", "%(n)s allocations stopped.", n),
        )  # fmt: skip

    @admin.action(description=_("Start"), permissions=["operate"])
    def start_selected(self, request, queryset):
        self._apply(
            request, queryset, services.allocation_start,
            lambda n: ngettext("%(n)s allocation started.", "%(n)s allocations started.", n),
        )  # fmt: skip

    def has_operate_permission(self, request):
        return request.user.is_superuser

    @admin.action(
        description="Replace impaired GPUs (same paid period and price)", permissions=["replace"]
    )
    def replace_selected(self, request, queryset):
        done = 0
        for allocation in queryset:
            try:
                services.allocation_replace(operator=request.user, allocation_id=allocation.pk)
                done += 1
            except DomainError as exc:
                messages.warning(request, f"{allocation.pk}: {exc.detail}")
        messages.info(request, f"{done} allocations replaced.")

    def has_replace_permission(self, request):
        return operator_can(request.user, Operation.REPLACE)


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ["at", "user", "kind", "amount", "currency", "description"]
    list_filter = ["kind", "reason", "currency"]
    search_fields = ["user__username"]
    list_select_related = [
        "user",
        "allocation__gpu_model",
        "allocation__period",
        "allocation__cluster",
    ]

    @admin.display(description=_("description"))
    def description(self, entry):
        return ledger_entry_text(entry)


@admin.register(Notice)
class NoticeAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "user", "kind", "ends_at", "sent_at", "attempts", "last_error"]
    list_filter = ["kind"]
    search_fields = ["user__username"]


from rentals import admin_maintenance  # noqa: E402, F401  (maintenance windows)
