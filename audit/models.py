"""The audit log's event tables: who did what, when, from where.

Each table is a django-pghistory event model of another app's model, declared here so that
the tracked apps stay unaware of it. pghistory's triggers write the rows inside the
statement that made the change, so a change made by raw SQL (the enforcement pass's expiry,
`rentals.sql.booking.ENFORCE_EXPIRE`) is recorded as surely as one made through the ORM. The
triggers fire only on the changes that matter (a state, a paid period, a role, a price),
so the booking path pays one insert per booking and nothing for its other rows.

The triggers live in `audit`'s migrations (`audit.operations.AddTriggerTo`), not in the
tracked apps': see that module.

Who and from where is pghistory's context (`pgh_context`, JSON): the middleware
(`audit.context.AuditContextMiddleware`) sets the user, address, method and path of a
request and the API token that made it; Celery tasks are the system with the task's name.

The rows are append-only: a trigger refuses every UPDATE, and a DELETE but the retention
task's of rows older than AUDIT_RETENTION_DAYS (`audit.services.audit_prune`).
"""

from typing import Any

import pghistory
import pgtrigger
from django.db import models

from accounts.models import ApiToken, Invitation, Membership, SshKey, Team
from audit import sql
from catalog.models import GpuPrice, OptionPrice
from payments.models import Card, CashEntry, CashSource
from rentals.models import Allocation, LedgerEntry, LedgerKind, MaintenanceWindow
from telemetry.models import Flag


def _changed(*fields: str) -> pgtrigger.Condition:
    """Some of these columns changed (IS DISTINCT FROM: NULLs compare)."""
    return pgtrigger.AnyChange(*fields)


def _append_only(model_name: str) -> dict[str, Any]:
    """Meta for an event table: refuse UPDATE always, DELETE but the retention's."""
    return {
        "triggers": [
            pgtrigger.Protect(name="audit_no_update", operation=pgtrigger.Update),
            pgtrigger.Protect(
                name="audit_no_early_delete",
                operation=pgtrigger.Delete,
                condition=pgtrigger.Condition(sql.DELETE_REFUSED),
            ),
        ],
        "indexes": [
            models.Index(fields=["-pgh_created_at", "-pgh_id"], name=f"audit_{model_name}_at"[:30]),
        ],
    }


def _event_model(tracked, *trackers, fields, name, team_index=False):
    meta = _append_only(name.lower())
    if team_index:
        meta["indexes"].append(
            models.Index(
                fields=["team", "-pgh_created_at", "-pgh_id"],
                name=f"audit_{name.lower()}_team"[:30],
            )
        )
    # The tracked foreign keys as plain, unindexed columns: each index is one more write in
    # the tracked statement (a booking's), and the log is read by time and team (the
    # indexes above) and by object (pgh_obj's), never by GPU model or node.
    attrs = {}
    for name in fields:
        field = tracked._meta.get_field(name)
        if field.is_relation:
            attrs[name] = models.ForeignKey(
                field.remote_field.model, on_delete=models.DO_NOTHING, db_constraint=False,
                db_index=False, null=field.null, related_name="+", related_query_name="+",
            )  # fmt: skip
    return pghistory.create_event_model(
        tracked,
        *trackers,
        fields=fields,
        attrs=attrs,
        context_field=pghistory.ContextJSONField(),
        obj_field=pghistory.ObjForeignKey(db_constraint=False, on_delete=models.DO_NOTHING),
        app_label="audit",
        model_name=f"Base{name}",
        meta=meta,
    )


# --- rentals ---------------------------------------------------------------------------


class AllocationAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        Allocation,
        pghistory.InsertEvent("booked"),
        # started, stopped, cancelled, expired: the new state says which.
        pghistory.UpdateEvent("state", condition=_changed("state")),
        pghistory.UpdateEvent(
            "extended",
            condition=pgtrigger.Q(
                old__paid_until__df=pgtrigger.F("new__paid_until"),
                old__paid_from=pgtrigger.F("new__paid_from"),
            ),
        ),
        pghistory.UpdateEvent(
            "moved", condition=pgtrigger.Q(old__paid_from__df=pgtrigger.F("new__paid_from"))
        ),
        pghistory.UpdateEvent("replaced", condition=_changed("node")),
        fields=[
            "team",
            "user",
            "gpu_model",
            "gpu_count",
            "node",
            "state",
            "paid_from",
            "paid_until",
        ],  # fmt: skip
        name="AllocationAudit",
        team_index=True,
    )
):
    """Bookings, starts, stops, cancels, expiries, extensions, moves and replacements."""


class CreditAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        LedgerEntry,
        pghistory.InsertEvent(
            "credit issued", condition=pgtrigger.Q(new__kind=LedgerKind.CREDIT.value)
        ),
        fields=["team", "user", "allocation", "kind", "amount", "currency", "reason"],
        name="CreditAudit",
        team_index=True,
    )
):
    """Credits the provider granted (ledger rows of kind credit), by staff or by the system."""


class MaintenanceAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        MaintenanceWindow,
        pghistory.InsertEvent("maintenance scheduled"),
        pghistory.UpdateEvent(
            "maintenance changed", condition=_changed("starts_at", "ends_at", "reason")
        ),
        pghistory.DeleteEvent("maintenance removed"),
        fields=["starts_at", "ends_at", "reason", "created_by"],
        name="MaintenanceAudit",
    )
):
    """Staff's maintenance windows."""


# --- accounts --------------------------------------------------------------------------


class SshKeyAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        SshKey,
        pghistory.InsertEvent("key added"),
        pghistory.DeleteEvent("key removed"),
        fields=["user", "name", "key_type", "fingerprint"],
        name="SshKeyAudit",
    )
):
    """SSH keys added and removed (a user's; a team sees its members')."""


class ApiTokenAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        ApiToken,
        pghistory.InsertEvent("token created"),
        pghistory.UpdateEvent("token revoked", condition=_changed("revoked_at")),
        pghistory.DeleteEvent("token deleted"),
        fields=["user", "team", "name", "hint", "role", "expires_at", "revoked_at"],
        name="ApiTokenAudit",
        team_index=True,
    )
):
    """API tokens created, revoked and deleted (not their use: `last_used_at` is not tracked)."""


class MembershipAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        Membership,
        pghistory.InsertEvent("member added"),
        pghistory.UpdateEvent("role changed", condition=_changed("role")),
        pghistory.DeleteEvent("member removed"),
        fields=["team", "user", "role"],
        name="MembershipAudit",
        team_index=True,
    )
):
    """Who joined, left or was removed from a team, and role changes."""


class InvitationAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        Invitation,
        pghistory.InsertEvent("invited"),
        pghistory.UpdateEvent("invitation accepted", condition=_changed("accepted_at")),
        pghistory.UpdateEvent("invitation revoked", condition=_changed("revoked_at")),
        fields=[
            "team",
            "email",
            "role",
            "invited_by",
            "accepted_by",
            "accepted_at",
            "revoked_at",
        ],  # fmt: skip
        name="InvitationAudit",
        team_index=True,
    )
):
    """Invitations sent, accepted and revoked."""


class TeamAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        Team,
        pghistory.UpdateEvent("spend limit changed", condition=_changed("monthly_spend_limit")),
        pghistory.UpdateEvent("second factor changed", condition=_changed("require_second_factor")),
        pghistory.UpdateEvent(
            "invoice details changed",
            condition=_changed("legal_name", "address", "country", "vat_id"),
        ),
        fields=[
            "name",
            "monthly_spend_limit",
            "require_second_factor",
            "legal_name",
            "address",
            "country",
            "vat_id",
        ],  # fmt: skip
        name="TeamAudit",
    )
):
    """A team's spend limit, its two-factor rule and the buyer details its invoices name."""


# --- payments --------------------------------------------------------------------------


class CardAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        Card,
        pghistory.InsertEvent("card saved"),
        pghistory.UpdateEvent("card removed", condition=_changed("removed_at")),
        fields=["team", "brand", "last4", "exp_month", "exp_year", "removed_at"],
        name="CardAudit",
        team_index=True,
    )
):
    """Cards saved and removed (only the processor's id, brand, last four and expiry)."""


class CashAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        CashEntry,
        pghistory.InsertEvent(
            "payment recorded", condition=pgtrigger.Q(new__source=CashSource.MANUAL.value)
        ),
        fields=["team", "kind", "source", "amount", "currency", "reference", "recorded_by"],
        name="CashAudit",
        team_index=True,
    )
):
    """Payments staff recorded by hand, with their reason."""


# --- catalog ---------------------------------------------------------------------------


class GpuPriceAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        GpuPrice,
        pghistory.InsertEvent("price changed"),
        # Price rows are never edited (a new row supersedes): an edit is worth seeing.
        pghistory.UpdateEvent(
            "price edited", condition=_changed("unit_price", "currency", "effective_from")
        ),
        fields=["gpu_model", "period", "unit_price", "currency", "effective_from", "created_by"],
        name="GpuPriceAudit",
    )
):
    """GPU prices scheduled (and any edit of a price row)."""


class OptionPriceAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        OptionPrice,
        pghistory.InsertEvent("price changed"),
        pghistory.UpdateEvent(
            "price edited", condition=_changed("unit_price", "currency", "effective_from")
        ),
        fields=["option", "period", "unit_price", "currency", "effective_from", "created_by"],
        name="OptionPriceAudit",
    )
):
    """Option prices scheduled (and any edit of a price row)."""


# --- telemetry -------------------------------------------------------------------------


class FlagAudit(
    _event_model(  # type: ignore[misc]  # a base pghistory makes at import
        Flag,
        pghistory.UpdateEvent("flag acknowledged", condition=_changed("acknowledged_at")),
        fields=["kind", "severity", "node", "gpu", "acknowledged_at", "acknowledged_by", "note"],
        name="FlagAudit",
    )
):
    """Staff's acknowledgements of fleet flags."""


EVENT_MODELS = (
    AllocationAudit, CreditAudit, MaintenanceAudit, SshKeyAudit, ApiTokenAudit,
    MembershipAudit, InvitationAudit, TeamAudit, GpuPriceAudit, OptionPriceAudit, FlagAudit,
    CardAudit, CashAudit,
)  # fmt: skip
