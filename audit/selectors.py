"""The audit log read as one list, whatever table an event is in: rows of {at, actor, ip,
action, object, changes (before → after)}, newest first, paged by keyset.

The event tables are read as one `UNION ALL` (each branch its table's columns as JSON), in
the order (at, source, id), so a page is one statement however many tables there are; the
names the rows mention (people, GPU models, nodes, periods, options) are then read in one
statement per kind.
"""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, cast

from django.contrib.auth import get_user_model
from django.db.models import (
    CharField,
    DecimalField,
    F,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Cast, JSONObject
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy as _
from pghistory.core import Tracker
from pghistory.models import Event

from accounts.models import Membership, Role
from audit import models as events
from audit.errors import BadAuditFilter
from catalog.models import GpuModel, Option, RentalPeriod
from catalog.models import Node as CatalogNode
from core.money import default_currency, money_text
from core.pagination import aware_datetime, cursor_read, cursor_write
from rentals.models import AllocationState

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

PAGE_SIZE = 50

# Every action the log knows, in words (en/pl through gettext), in the filter's order.
ACTIONS = {
    "booked": _("booked"),
    "started": _("started"),
    "stopped": _("stopped"),
    "cancelled": _("cancelled"),
    "expired": _("expired"),
    "extended": _("extended"),
    "moved": _("moved"),
    "replaced": _("GPUs replaced"),
    "credit issued": _("credit issued"),
    "key added": _("key added"),
    "key removed": _("key removed"),
    "token created": _("token created"),
    "token revoked": _("token revoked"),
    "token deleted": _("token deleted"),
    "member added": _("member added"),
    "role changed": _("role changed"),
    "member removed": _("member removed"),
    "invited": _("invited"),
    "invitation accepted": _("invitation accepted"),
    "invitation revoked": _("invitation revoked"),
    "spend limit changed": _("spend limit changed"),
    "second factor changed": _("two-factor rule changed"),
    "invoice details changed": _("invoice details changed"),
    "price changed": _("price changed"),
    "price edited": _("price row edited"),
    "maintenance scheduled": _("maintenance scheduled"),
    "maintenance changed": _("maintenance changed"),
    "maintenance removed": _("maintenance removed"),
    "flag acknowledged": _("flag acknowledged"),
    "card saved": _("card saved"),
    "card removed": _("card removed"),
    "payment recorded": _("payment recorded by hand"),
}
# An allocation's "state" event is named by the state it went to.
_STATE_ACTIONS = {
    "started": AllocationState.RUNNING,
    "stopped": AllocationState.STOPPED,
    "cancelled": AllocationState.CANCELLED,
    "expired": AllocationState.EXPIRED,
}
_ACTION_OF_STATE = {str(state): action for action, state in _STATE_ACTIONS.items()}

FIELD_NAMES = {
    "state": _("state"),
    "paid_from": _("paid from"),
    "paid_until": _("paid until"),
    "node": _("node"),
    "gpu_model": _("GPU model"),
    "gpu_count": _("GPUs"),
    "role": _("role"),
    "monthly_spend_limit": _("monthly spend limit"),
    "require_second_factor": _("two-factor sign-in required"),
    "legal_name": _("legal name"),
    "address": _("address"),
    "country": _("country"),
    "vat_id": _("VAT ID"),
    "unit_price": _("unit price"),
    "effective_from": _("effective from"),
    "starts_at": _("starts"),
    "ends_at": _("ends"),
    "reason": _("reason"),
    "amount": _("amount"),
    "name": _("name"),
    "fingerprint": _("fingerprint"),
    "email": _("e-mail"),
    "revoked_at": _("revoked"),
    "accepted_at": _("accepted"),
    "expires_at": _("expires"),
    "acknowledged_at": _("acknowledged"),
    "note": _("note"),
    "brand": _("card brand"),
    "last4": _("last four digits"),
    "removed_at": _("removed at"),
    "currency": _("currency"),
    "reference": _("reference"),
}


@dataclass(frozen=True)
class Source:
    """One event table: its name in cursors, which columns a row shows as changes, which
    event came before (the same object, or for prices the same GPU model/option, period
    and currency), and how a team's rows are found (None: staff only)."""

    key: str
    model: type[Event]
    shown: tuple[str, ...]
    before_of: tuple[str, ...] = ("pgh_obj_id",)
    team: str | None = "team_id"

    @property
    def labels(self) -> frozenset[str | None]:
        trackers: list[Tracker] = self.model.pgh_trackers or []  # None on pghistory's base
        return frozenset(tracker.label for tracker in trackers)

    def columns(self) -> dict[str, Cast | F]:
        """The tracked columns as JSON members, by field name (team → team_id; money as
        text, so that 12.50 stays 12.50 and not a float)."""
        names: dict[str, Cast | F] = {}
        for f in self.model._meta.concrete_fields:
            if f.name.startswith("pgh_") or f.name == "id":
                continue
            is_decimal = isinstance(f, DecimalField)
            names[f.name] = Cast(f.attname, CharField()) if is_decimal else F(f.attname)
        return names

    def team_rows(self, team_id: int) -> Q | None:
        if self.team is None:
            return None
        if self.team == "members":
            return Q(user_id__in=Membership.objects.filter(team_id=team_id).values("user_id"))
        return Q(**{self.team: team_id})


# Sorted by key: the union's order (at, source, id) compares keys as text.
SOURCES = tuple(
    sorted(
        (
            Source("allocation", events.AllocationAudit,
                   ("state", "paid_from", "paid_until", "node", "gpu_model", "gpu_count")),
            Source("card", events.CardAudit, ("brand", "last4", "removed_at")),
            Source("cash", events.CashAudit, ("amount", "currency", "reference")),
            Source("credit", events.CreditAudit, ("amount",)),
            Source("flag", events.FlagAudit, ("acknowledged_at", "note"), team=None),
            Source("gpuprice", events.GpuPriceAudit, ("unit_price", "effective_from"),
                   before_of=("gpu_model_id", "period_id", "currency"), team=None),
            Source("invitation", events.InvitationAudit,
                   ("email", "role", "accepted_at", "revoked_at")),
            Source("maintenance", events.MaintenanceAudit, ("starts_at", "ends_at", "reason"),
                   team=None),
            Source("membership", events.MembershipAudit, ("role",)),
            Source("optionprice", events.OptionPriceAudit, ("unit_price", "effective_from"),
                   before_of=("option_id", "period_id", "currency"), team=None),
            Source("sshkey", events.SshKeyAudit, ("name", "fingerprint"), team="members"),
            Source("team", events.TeamAudit,
                   ("monthly_spend_limit", "require_second_factor", "legal_name", "address",
                    "country", "vat_id"),
                   team="pgh_obj_id"),
            Source("token", events.ApiTokenAudit, ("name", "role", "expires_at", "revoked_at")),
        ),
        key=lambda s: s.key,
    )
)  # fmt: skip


class RawEvent(TypedDict):
    """A row of the union (`_branch`): the event's columns as JSON, and those of the event
    before it on the same object (None for the first)."""

    a_at: datetime
    a_source: str
    a_id: int
    a_label: str
    a_context: dict[str, Any] | None
    a_obj: str
    a_data: dict[str, Any]
    a_before: dict[str, Any] | None


@dataclass(frozen=True)
class Change:
    field: str
    before: str
    after: str


@dataclass
class AuditRow:
    at: datetime
    actor: str
    user_id: int | None
    ip: str
    method: str
    url: str
    token_id: int | None
    task: str
    action: str
    action_label: str
    source: str
    object_id: str
    object: str
    changes: list[Change] = field(default_factory=list)
    cursor: str = ""


@dataclass
class AuditPage:
    rows: list[AuditRow]
    next_cursor: str | None


@dataclass(frozen=True)
class AuditFilter:
    action: str | None = None
    since: date | None = None
    until: date | None = None
    cursor: tuple[datetime, str, int] | None = None


def audit_filter(
    *,
    action: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
) -> AuditFilter:
    """A filter from strings (a page's query or an API's), or BadAuditFilter naming the field."""
    errors: dict[str, StrOrPromise] = {}
    if action and action not in ACTIONS:
        errors["action"] = _("Unknown action.")
    dates: dict[str, date] = {}
    for name, value in (("since", since), ("until", until)):
        if value:
            try:
                dates[name] = date.fromisoformat(value)
            except ValueError:
                errors[name] = _("Enter a date as YYYY-MM-DD.")
    if not errors and "since" in dates and "until" in dates and dates["since"] > dates["until"]:
        errors["until"] = _("The end date is before the start date.")
    parsed = None
    if cursor:
        parsed = _cursor_read(cursor)
        if parsed is None:
            errors["cursor"] = _("This page link is not valid.")
    if errors:
        raise BadAuditFilter(errors)
    return AuditFilter(
        action=action or None, since=dates.get("since"), until=dates.get("until"), cursor=parsed
    )


def _source_key(text: str) -> str:
    if text not in {s.key for s in SOURCES}:
        raise ValueError(text)
    return text


def _cursor_read(text: str) -> tuple[datetime, str, int] | None:
    key = cursor_read(text, aware_datetime, _source_key, int)
    if key is None:
        return None
    at, source, pk = key
    if at is None or source is None or pk is None:  # a part left empty: no cursor of ours
        return None
    return at, source, pk


def _branch(
    source: Source, flt: AuditFilter, team_id: int | None
) -> "QuerySet[Event, dict[str, Any]] | None":
    """One table's part of the union, or None when the filter rules it out."""
    qs = source.model._default_manager.order_by()
    if team_id is not None:
        scope = source.team_rows(team_id)
        if scope is None:
            return None
        qs = qs.filter(scope)
    if flt.action:
        if source.key == "allocation" and flt.action in _STATE_ACTIONS:
            # The allocation's event table has `state`; the plugin sees pghistory's base only.
            qs = qs.filter(pgh_label="state", state=_STATE_ACTIONS[flt.action])  # type: ignore[misc]
        elif flt.action in source.labels:
            qs = qs.filter(pgh_label=flt.action)
        else:
            return None
    if flt.since:
        qs = qs.filter(pgh_created_at__gte=datetime.combine(flt.since, time.min, UTC))
    if flt.until:
        end = datetime.combine(flt.until + timedelta(days=1), time.min, UTC)
        qs = qs.filter(pgh_created_at__lt=end)
    if flt.cursor:
        at, key, pk = flt.cursor
        if source.key < key:
            qs = qs.filter(pgh_created_at__lte=at)
        elif source.key == key:
            qs = qs.filter(Q(pgh_created_at__lt=at) | Q(pgh_created_at=at, pgh_id__lt=pk))
        else:
            qs = qs.filter(pgh_created_at__lt=at)
    columns = source.columns()
    data = JSONObject(**columns)
    before = source.model._default_manager.filter(
        pgh_id__lt=OuterRef("pgh_id"), **{c: OuterRef(c) for c in source.before_of}
    ).order_by("-pgh_id")
    snapshot = before.annotate(snapshot=JSONObject(**source.columns())).values("snapshot")[:1]
    return qs.annotate(
        a_at=F("pgh_created_at"),
        a_source=Value(source.key, output_field=CharField()),
        a_id=F("pgh_id"),
        a_label=F("pgh_label"),
        a_context=F("pgh_context"),
        a_obj=Cast("pgh_obj_id", CharField()),
        a_data=data,
        a_before=Subquery(snapshot),
    ).values("a_at", "a_source", "a_id", "a_label", "a_context", "a_obj", "a_data", "a_before")


def audit_page(
    *, team_id: int | None, flt: AuditFilter = AuditFilter(), size: int = PAGE_SIZE
) -> AuditPage:
    """One page of the log, newest first: a team's rows (`team_id`), or every row (None, for
    staff). The caller checked who may read it."""
    branches = [b for s in SOURCES if (b := _branch(s, flt, team_id)) is not None]
    if not branches:
        return AuditPage(rows=[], next_cursor=None)
    union = branches[0].union(*branches[1:], all=True) if len(branches) > 1 else branches[0]
    # The rows are the values() named in `_branch`, which the stubs cannot follow.
    raw = cast(list[RawEvent], list(union.order_by("-a_at", "-a_source", "-a_id")[: size + 1]))
    more = len(raw) > size
    raw = raw[:size]
    rows = _rows(raw)
    next_cursor = None
    if more:
        last = raw[-1]
        next_cursor = cursor_write(last["a_at"], last["a_source"], last["a_id"])
    return AuditPage(rows=rows, next_cursor=next_cursor)


# --- turning events into rows -----------------------------------------------------------


class _Names:
    """The names a page's rows mention, read in one statement per kind."""

    KINDS: ClassVar[dict[str, tuple[type[Model], str]]] = {
        "user": (get_user_model(), "username"),
        "gpu_model": (GpuModel, "name"),
        "node": (CatalogNode, "hostname"),
        "period": (RentalPeriod, "name"),
        "option": (Option, "name"),
    }

    def __init__(self, raw: list[RawEvent]) -> None:
        wanted: dict[str, set[object]] = {kind: set() for kind in self.KINDS}
        for r in raw:
            ctx = r["a_context"] or {}
            if isinstance(ctx.get("user"), int):
                wanted["user"].add(ctx["user"])
            for snapshot in (r["a_data"], r["a_before"] or {}):
                for kind, key in (
                    ("user", "user"), ("user", "created_by"), ("user", "acknowledged_by"),
                    ("user", "invited_by"), ("gpu_model", "gpu_model"), ("node", "node"),
                    ("period", "period"), ("option", "option"),
                ):  # fmt: skip
                    if snapshot.get(key) is not None:
                        wanted[kind].add(snapshot[key])
        self.names: dict[str, dict[object, str]] = {}
        for kind, ids in wanted.items():
            if not ids:
                self.names[kind] = {}
                continue
            model, attr = self.KINDS[kind]
            objs = model._default_manager.filter(pk__in=ids)
            self.names[kind] = {o.pk: (getattr(o, attr) if attr else str(o)) for o in objs}

    def of(self, kind: str, pk: object) -> str:
        if pk is None:
            return "—"
        return self.names[kind].get(pk, f"#{pk}")


_FK_KINDS = {"node": "node", "gpu_model": "gpu_model", "period": "period", "option": "option"}


_MONEY = {"unit_price", "amount", "monthly_spend_limit"}
# What an update event is about, where a row's other shown fields may not have changed.
_LABEL_FIELDS = {
    "spend limit changed": ("monthly_spend_limit",),
    "second factor changed": ("require_second_factor",),
    "invoice details changed": ("legal_name", "address", "country", "vat_id"),
}


def _value(names: _Names, name: str, value: Any, currency: str | None = None) -> str:
    """`value`: a JSON value as the event row holds it."""
    if value is None or value == "":
        return "—"
    if name in _MONEY:
        try:
            return money_text(Decimal(value), currency or default_currency())
        except (InvalidOperation, ValueError):
            return str(value)
    if name in _FK_KINDS:
        return names.of(_FK_KINDS[name], value)
    if name == "role":
        return str(Role(value).label) if value in Role.values else str(value)
    if name == "state":
        return str(AllocationState(value).label) if value in AllocationState.values else str(value)
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        moment = parse_datetime(value)
        if moment is not None:
            return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return str(value)


def _object(source: str, obj: str, data: dict[str, Any], names: _Names) -> str:
    if source == "allocation":
        return (
            f"{_('allocation')} {obj[:8]} · {names.of('gpu_model', data.get('gpu_model'))}"
            f" × {data.get('gpu_count')}"
        )
    if source == "credit":
        return f"{_('allocation')} {str(data.get('allocation') or '')[:8]}"
    if source in ("gpuprice", "optionprice"):
        what = (
            names.of("gpu_model", data.get("gpu_model"))
            if source == "gpuprice"
            else names.of("option", data.get("option"))
        )
        period = names.of("period", data.get("period")) if data.get("period") else _("once")
        return f"{what} / {period} ({data.get('currency')})"
    if source == "membership":
        return names.of("user", data.get("user"))
    if source == "invitation":
        return str(data.get("email"))
    if source == "sshkey":
        return f"{names.of('user', data.get('user'))}: {data.get('name')}"
    if source == "token":
        return f"{names.of('user', data.get('user'))}: {data.get('name')} (…{data.get('hint')})"
    if source == "team":
        return str(data.get("name"))
    if source == "maintenance":
        return f"{_('maintenance window')} {obj}"
    if source == "flag":
        return f"{data.get('kind')} · {names.of('node', data.get('node'))}"
    return obj  # pragma: no cover


def _changes(source: Source, row: RawEvent, names: _Names) -> list[Change]:
    after, before = row["a_data"], row["a_before"]
    label = row["a_label"]
    deleted = label in {"key removed", "token deleted", "member removed", "maintenance removed"}
    currency = after.get("currency")
    out = []
    for name in _LABEL_FIELDS.get(label, source.shown):
        new = after.get(name)
        shown = _value(names, name, new, currency)
        if deleted:
            out.append(Change(str(FIELD_NAMES[name]), shown, "—"))
        elif before is None:
            if new is not None and new != "":
                out.append(Change(str(FIELD_NAMES[name]), "—", shown))
        elif before.get(name) != new:
            old = _value(names, name, before.get(name), before.get("currency"))
            out.append(Change(str(FIELD_NAMES[name]), old, shown))
    return out


def _action(row: RawEvent) -> str:
    if row["a_source"] == "allocation" and row["a_label"] == "state":
        return _ACTION_OF_STATE.get(str(row["a_data"].get("state")), "state")
    return row["a_label"]


def _rows(raw: list[RawEvent]) -> list[AuditRow]:
    names = _Names(raw)
    by_key = {s.key: s for s in SOURCES}
    out = []
    for r in raw:
        ctx = r["a_context"] or {}
        user_id = ctx.get("user") if isinstance(ctx.get("user"), int) else None
        if user_id is not None:
            actor = names.of("user", user_id)
        elif ctx.get("actor") == "system":
            actor = f"{_('system')}: {ctx.get('task', '')}"
        else:
            actor = str(_("system"))
        action = _action(r)
        out.append(
            AuditRow(
                at=r["a_at"],
                actor=actor,
                user_id=user_id,
                ip=str(ctx.get("ip") or ""),
                method=str(ctx.get("method") or ""),
                url=str(ctx.get("url") or ""),
                token_id=ctx.get("token") if isinstance(ctx.get("token"), int) else None,
                task=str(ctx.get("task") or ""),
                action=action,
                action_label=str(ACTIONS.get(action, action)),
                source=r["a_source"],
                object_id=r["a_obj"],
                object=_object(r["a_source"], r["a_obj"], r["a_data"], names),
                changes=_changes(by_key[r["a_source"]], r, names),
                cursor=cursor_write(r["a_at"], r["a_source"], r["a_id"]),
            )
        )
    return out
