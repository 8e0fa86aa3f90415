from allauth.account.admin import EmailAddressAdmin
from allauth.account.models import EmailAddress
from django.contrib import admin

from accounts.models import EmailAddressRecord, Invitation, Membership, SpendLimitChange, Team
from core.admin import ReadOnlyAdmin, ReadOnlyInline


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    fields = ["user", "role", "joined_at"]
    readonly_fields = ["joined_at"]
    autocomplete_fields = ["user"]


class SpendLimitChangeInline(ReadOnlyInline):
    model = SpendLimitChange
    fields = readonly_fields = ["at", "by", "old_limit", "new_limit"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "personal_for", "monthly_spend_limit", "require_second_factor",
                    "created_at"]  # fmt: skip
    search_fields = ["name", "memberships__user__username"]
    list_filter = [("personal_for", admin.EmptyFieldListFilter), "require_second_factor"]
    readonly_fields = ["personal_for", "created_at"]
    inlines = [MembershipInline, SpendLimitChangeInline]


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ["email", "team", "role", "created_at", "expires_at", "accepted_at"]
    search_fields = ["email", "team__name"]


# One "Accounts" section: allauth's addresses move here (allauth.account's admin registered
# them under its own app, also called Accounts; it is installed, and so loaded, before us).
if admin.site.is_registered(EmailAddress):
    admin.site.unregister(EmailAddress)
admin.site.register(EmailAddressRecord, EmailAddressAdmin)
