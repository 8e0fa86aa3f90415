from allauth.account.admin import EmailAddressAdmin
from allauth.account.models import EmailAddress
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from accounts.buyer import buyer_problems
from accounts.models import (
    BuyerReview,
    EmailAddressRecord,
    Invitation,
    Membership,
    SpendLimitChange,
    Team,
    TeamCreditLimit,
)
from core.admin import ReadOnlyAdmin, ReadOnlyInline, when_column


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    fields = ["user", "role", "joined_at"]
    readonly_fields = ["joined_at"]
    autocomplete_fields = ["user"]


class SpendLimitChangeInline(ReadOnlyInline):
    model = SpendLimitChange
    fields = readonly_fields = ("at", "by", "old_limit", "new_limit")


class BuyerReviewInline(ReadOnlyInline):
    model = BuyerReview
    # Django shows callables in `fields` that are read-only too; the stubs allow only names.
    fields = readonly_fields = (  # type: ignore[assignment]
        when_column("found_at", _("found at")), "country", "vat_id", "problem",
        "treatment_before", "treatment_now", when_column("resolved_at", _("resolved at")),
    )  # fmt: skip


class InvoiceDetailsReviewFilter(admin.SimpleListFilter):
    """Teams whose invoice details stopped passing the checks and are not corrected yet."""

    title = _("invoice details")
    parameter_name = "invoice_details"

    def lookups(self, request, model_admin):
        return [("review", _("to be corrected (taxed as a consumer)"))]

    def queryset(self, request, queryset):
        if self.value() == "review":
            return queryset.filter(buyer_reviews__resolved_at__isnull=True).distinct()
        return queryset


class TeamCreditLimitInline(admin.TabularInline):
    """Invoiced teams: how much they may owe per currency (no row: no limit)."""

    model = TeamCreditLimit
    extra = 0


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "personal_for", "billing_mode", "monthly_spend_limit",
                    "require_second_factor", "created_at"]  # fmt: skip
    search_fields = ["name", "memberships__user__username"]
    list_filter = [
        ("personal_for", admin.EmptyFieldListFilter), "require_second_factor", "billing_mode",
        InvoiceDetailsReviewFilter,
    ]  # fmt: skip
    readonly_fields = ["personal_for", "created_at"]
    inlines = [MembershipInline, SpendLimitChangeInline, BuyerReviewInline, TeamCreditLimitInline]


@admin.register(BuyerReview)
class BuyerReviewAdmin(ReadOnlyAdmin):
    """Teams whose stored invoice details stopped passing the checks: when it was
    found, the details then, the treatment their quotes had and the one they get now, and
    whether an owner has corrected them. Invoices issued before may need correcting."""

    list_display = [
        "team", when_column("found_at", _("found at")), "country", "vat_id", "problem",
        "treatment_before", "treatment_now", "why", when_column("resolved_at", _("resolved at")),
    ]  # fmt: skip
    list_filter = [
        ("resolved_at", admin.EmptyFieldListFilter), "problem", "treatment_before",
    ]  # fmt: skip
    search_fields = ["team__name", "team__legal_name", "vat_id"]
    list_select_related = ["team"]

    @admin.display(description=_("what the check says now"))
    def why(self, obj):
        if obj.resolved_at is not None:
            return "—"
        return " ".join(buyer_problems(obj.team).values()) or "—"


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ["email", "team", "role", "created_at", "expires_at", "accepted_at"]
    search_fields = ["email", "team__name"]


# One "Accounts" section: allauth's addresses move here (allauth.account's admin registered
# them under its own app, also called Accounts; it is installed, and so loaded, before us).
if admin.site.is_registered(EmailAddress):
    admin.site.unregister(EmailAddress)
admin.site.register(EmailAddressRecord, EmailAddressAdmin)
