"""Writes staff make to telemetry: acknowledging flags, emptying the former rollups."""

from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection, transaction
from django.utils.translation import gettext as _

from core.db import db_now
from core.errors import Invalid
from telemetry import sql
from telemetry.errors import AlreadyAcknowledged
from telemetry.models import Flag, FlagKind

NOTE_MAX = 500


@transaction.atomic
def flag_acknowledge(
    *, flag: Flag, user: AbstractBaseUser, note: str = "", now: datetime | None = None
) -> Flag:
    """Staff have seen the flag: who, when and their note are kept with it. An XID is an
    event, so acknowledging closes it; a condition that still holds (a hot GPU, a node
    that cannot be polled) stays open, marked seen, and closes when it clears."""
    if not isinstance(note, str) or len(note) > NOTE_MAX:
        raise Invalid({"note": _("A note is text of at most %(n)s characters.") % {"n": NOTE_MAX}})
    flag = Flag.objects.select_for_update().get(pk=flag.pk)
    if flag.acknowledged_at is not None:
        raise AlreadyAcknowledged(
            _("%(user)s acknowledged this flag already.")
            % {"user": flag.acknowledged_by.username if flag.acknowledged_by else _("someone")}
        )
    now = now or db_now()
    # The user model (accounts) is a layer above: AbstractBaseUser is what telemetry names.
    flag.acknowledged_by = user  # type: ignore[assignment]
    flag.acknowledged_at, flag.note = now, note.strip()
    if flag.kind == FlagKind.XID and flag.closed_at is None:
        flag.closed_at = now
    flag.save(update_fields=["acknowledged_at", "acknowledged_by", "note", "closed_at"])
    return flag


def former_rollups_truncate() -> None:
    """Empty the former per-GPU rollups (`GpuRollup`) at once: their hours and days became
    GPU hours and days when migrated, and their minutes are needed only until every
    holding's edges are kept (`manage.py holding_edges_convert`)."""
    with connection.cursor() as cursor:
        # Deferred foreign-key checks pending on it (a caller's transaction that wrote rows)
        # would refuse the TRUNCATE: run them first.
        cursor.execute(sql.CONSTRAINTS_IMMEDIATE)
        cursor.execute(sql.FORMER_ROLLUPS_TRUNCATE)
