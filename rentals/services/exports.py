"""Statement exports: a large statement's CSV, written in the background into the database.

Requested by the team's owner or billing members (Action.EXPORT_LEDGER), written by a worker
that streams the statement's rows (a server-side cursor, in the one transaction that also
marks it ready: half a file is never visible) through gzip into parts of about a MiB, so
memory stays that of one part whatever the size. Kept STATEMENT_EXPORT_DAYS, then its parts
are dropped and its row says "expired". A worker that dies mid-way leaves its claim to run
out; the sweep queues the export again. Reads (the list, the download) are in
rentals/selectors/exports.py."""

import zlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import translation
from django.utils.translation import gettext as _

from accounts.models import Team
from accounts.roles import Acting, Action, acting_as
from core.csv import csv_lines
from core.db import db_now, lease_free
from core.errors import DomainError, Invalid
from core.publish import publish
from rentals.errors import TooManyExports
from rentals.models import (
    IN_FLIGHT,
    ExportState,
    LedgerKind,
    Notice,
    NoticeKind,
    StatementExport,
    StatementExportPart,
)
from rentals.selectors.ledger import STATEMENT_HEADER, statement_rows
from rentals.services.notices import notices_queue

RUN_TASK = "rentals.tasks.statement_export_run_task"
PART_BYTES = 1 << 20  # compressed bytes per part row
GZIP_LEVEL = 1  # the fastest: level 6 took 24 % longer to store 11 % less (docs/operations.md)
# A writer's claim: longer than the largest export takes, so only a dead worker's runs out.
CLAIM = timedelta(minutes=30)
RETRY_AFTER = timedelta(minutes=2)  # after a failed attempt, before the sweep tries again
ATTEMPTS = 3
IN_FLIGHT_PER_TEAM = 3
BATCH = 100


def statement_export_request(
    *, acting: Acting, filters: Mapping[str, Any] | None = None, language: str
) -> StatementExport:
    """Queue an export of the team's statement as filtered (`since`, `until`, `kind`, as the
    statement page's). The same request while one is still being written is that one."""
    acting.require(Action.EXPORT_LEDGER)
    filters = filters or {}
    since, until, kind = filters.get("since"), filters.get("until"), filters.get("kind") or ""
    if since and until and since > until:
        raise Invalid({"until": _("The end comes before the start.")})
    if kind and kind not in LedgerKind.values:
        raise Invalid({"kind": _("Choose a kind from the list.")})
    with transaction.atomic():
        # One request of a team at a time decides against the exports in flight.
        Team.objects.select_for_update(no_key=True).filter(pk=acting.team.pk).first()
        in_flight = list(StatementExport.objects.filter(team=acting.team, state__in=IN_FLIGHT))
        for export in in_flight:
            if (export.since, export.until, export.kind, export.language) == (
                since, until, kind, language,
            ):  # fmt: skip
                return export
        if len(in_flight) >= IN_FLIGHT_PER_TEAM:
            raise TooManyExports(
                _(
                    "%(n)s exports of this team are still being prepared: try again when one "
                    "of them is ready."
                )
                % {"n": len(in_flight)}
            )
        export = StatementExport.objects.create(
            team=acting.team, requested_by=acting.user, language=language, since=since,
            until=until, kind=kind, created_at=db_now(),
        )  # fmt: skip
        queued = [str(export.pk)]
        transaction.on_commit(lambda: publish(RUN_TASK, queued))
    return export


def statement_export_run(*, export_id: UUID | str) -> str:
    """Write one export unless it is written or another worker is writing it: "ready",
    "failed" (the requester may no longer export, or the last attempt failed), "skipped".
    Raises what a failed attempt raised, after handing the export back to the sweep."""
    now = db_now()
    claimed = (
        StatementExport.objects.filter(pk=export_id, state__in=IN_FLIGHT)
        .filter(lease_free(now))
        .update(
            state=ExportState.RUNNING,
            claimed_until=now + CLAIM,
            started_at=now,
            attempts=F("attempts") + 1,
        )  # fmt: skip
    )
    if not claimed:
        return "skipped"
    export = StatementExport.objects.select_related("team", "requested_by").get(pk=export_id)
    try:
        _export_write(export)
    except DomainError as exc:  # the requester left the team or lost the role: final
        _export_failed(export, exc, final=True)
        return "failed"
    except Exception as exc:  # the database's, or a bug's: retried by the sweep
        final = export.attempts >= ATTEMPTS
        _export_failed(export, exc, final=final)
        if final:
            return "failed"
        raise
    return "ready"


def _export_failed(export: StatementExport, exc: BaseException, *, final: bool) -> None:
    StatementExport.objects.filter(pk=export.pk).update(
        state=ExportState.FAILED if final else ExportState.QUEUED,
        claimed_until=None if final else db_now() + RETRY_AFTER,
        last_error=f"{type(exc).__name__}: {exc}"[:300],
    )


@transaction.atomic
def _export_write(export: StatementExport) -> None:
    """The file, its facts and the requester's notice, in one transaction."""
    acting = acting_as(export.requested_by, export.team)
    acting.require(Action.EXPORT_LEDGER)
    StatementExportPart.objects.filter(export=export).delete()  # none, unless by hand
    rows = _Counted(statement_rows(acting=acting, filters=export.filters))
    with translation.override(export.language):  # the descriptions, as the requester reads
        size, stored, parts = _parts_write(export, csv_lines(STATEMENT_HEADER, rows))
    now = db_now()
    expires_at = now + timedelta(days=settings.ANCHORGPU["STATEMENT_EXPORT_DAYS"])
    StatementExport.objects.filter(pk=export.pk).update(
        state=ExportState.READY, rows=rows.count, size=size, stored=stored, parts=parts,
        finished_at=now, expires_at=expires_at, claimed_until=None, last_error="",
    )  # fmt: skip
    notice = Notice.objects.create(
        user=export.requested_by, kind=NoticeKind.EXPORT_READY, statement_export=export,
        ends_at=expires_at, created_at=now,
    )  # fmt: skip
    if export.requested_by.email:
        transaction.on_commit(lambda: notices_queue([notice.pk]))


class _Counted:
    """The rows, counted as they pass."""

    def __init__(self, rows: Iterable[list[Any]]) -> None:
        self.rows = rows
        self.count = 0

    def __iter__(self) -> Iterator[list[Any]]:
        for row in self.rows:
            self.count += 1
            yield row


def _parts_write(export: StatementExport, lines: Iterable[str]) -> tuple[int, int, int]:
    """The CSV through one gzip stream, stored a part whenever a MiB of it is ready: (the
    CSV's bytes, the gzip's bytes, the parts)."""
    gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: the gzip container
    pending = bytearray()
    size = stored = seq = 0
    for text in lines:
        raw = text.encode()
        size += len(raw)
        pending += gzip.compress(raw)
        if len(pending) >= PART_BYTES:
            StatementExportPart.objects.create(export=export, seq=seq, data=bytes(pending))
            stored, seq = stored + len(pending), seq + 1
            pending.clear()
    pending += gzip.flush()
    StatementExportPart.objects.create(export=export, seq=seq, data=bytes(pending))
    return size, stored + len(pending), seq + 1


def statement_exports_resume(
    *, now: datetime | None = None, older_than: timedelta = timedelta(minutes=1)
) -> list[str]:
    """Queue the exports still owed a writer: a queueing lost with a broker outage, a
    worker that died (its claim ran out), a failed attempt's wait over."""
    now = now or db_now()
    owed = [
        str(pk)
        for pk in StatementExport.objects.filter(
            state__in=IN_FLIGHT, created_at__lte=now - older_than
        )
        .filter(lease_free(now))
        .order_by("created_at")
        .values_list("pk", flat=True)[:BATCH]
    ]
    publish(RUN_TASK, owed)
    return owed


def statement_exports_prune(*, now: datetime | None = None) -> int:
    """Drop the files of exports past their `expires_at`; their rows stay, "expired"."""
    now = now or db_now()
    pruned = 0
    while batch := _prune_batch(now):
        pruned += batch
    return pruned


@transaction.atomic
def _prune_batch(now: datetime) -> int:
    due = list(
        StatementExport.objects.select_for_update(skip_locked=True)
        .filter(state=ExportState.READY, expires_at__lte=now)
        .values_list("pk", flat=True)[:BATCH]
    )
    StatementExportPart.objects.filter(export_id__in=due).delete()
    StatementExport.objects.filter(pk__in=due).update(state=ExportState.EXPIRED, parts=0)
    return len(due)
