from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from catalog.admin import NodeAdmin
from catalog.models import Node
from core.admin import ReadOnlyAdmin
from telemetry.agents import agent_credential_issue, agent_credential_revoke
from telemetry.models import Flag, NodeAgent


@admin.register(Flag)
class FlagAdmin(ReadOnlyAdmin):
    list_display = [
        "node", "gpu", "kind", "severity", "detail", "opened_at", "last_seen_at", "closed_at",
        "acknowledged_by",
    ]  # fmt: skip
    list_filter = ["kind", "severity"]
    list_select_related = ["node", "gpu", "acknowledged_by"]


class NodeAgentInline(admin.StackedInline):
    model = NodeAgent
    can_delete = False
    extra = 0
    max_num = 0
    fields = readonly_fields = (
        "hint", "issued_at", "issued_by", "revoked_at", "last_seen_at", "served_generation",
        "applied_generation", "applied_at", "errors", "agent_version",
    )  # fmt: skip
    verbose_name = _("node agent")


@admin.action(description=_("Issue a new agent credential (the old one stops working)"))
def issue_agent_credential(modeladmin, request, queryset):
    for node in queryset.order_by("hostname"):
        secret = agent_credential_issue(node=node, by=request.user)
        messages.success(
            request,
            format_html(
                gettext("Agent credential for {node}, shown once: <code>{secret}</code>"),
                node=node.hostname,
                secret=secret,
            ),
        )


@admin.action(description=_("Revoke the agent credential"))
def revoke_agent_credential(modeladmin, request, queryset):
    revoked = sum(agent_credential_revoke(node=node) for node in queryset)
    messages.success(request, gettext("%(n)s agent credentials revoked.") % {"n": revoked})


class NodeWithAgentAdmin(NodeAdmin):
    """The catalog's node admin with its agent: credential actions and what it last said."""

    inlines = [*NodeAdmin.inlines, NodeAgentInline]
    # `actions` is not a ClassVar in the stubs (an instance may set its own); here it is read
    # from the class on purpose, to extend the catalog's.
    actions = [*(NodeAdmin.actions or []), issue_agent_credential, revoke_agent_credential]  # type: ignore[misc]

    def get_actions(self, request):
        actions = super().get_actions(request)
        if not request.user.has_perm("catalog.change_node"):
            actions.pop("issue_agent_credential", None)
            actions.pop("revoke_agent_credential", None)
        return actions


admin.site.unregister(Node)
admin.site.register(Node, NodeWithAgentAdmin)
