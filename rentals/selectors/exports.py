"""Reads of statement exports: a team's recent ones, and one export's file for download
(rentals/services/exports.py writes them)."""

import zlib
from collections.abc import Iterator
from uuid import UUID

from django.utils.translation import gettext as _

from accounts.roles import Acting, Action
from core.dates import when_text
from core.db import db_now
from rentals.errors import ExportExpired, ExportFailed, ExportNotFound, ExportNotReady
from rentals.models import ExportState, StatementExport, StatementExportPart

RECENT = 10
OUT_BYTES = 1 << 16  # CSV bytes per chunk handed to the server


def statement_exports_recent(*, acting: Acting, limit: int = RECENT) -> list[StatementExport]:
    """The team's newest exports, whatever their state (the statement page lists them)."""
    acting.require(Action.EXPORT_LEDGER)
    return list(StatementExport.objects.filter(team=acting.team).order_by("-created_at")[:limit])


def statement_export_team(*, pk: UUID | str) -> int:
    """The team an export belongs to, for whom a download then acts as; none: not found."""
    team_id = StatementExport.objects.filter(pk=pk).values_list("team_id", flat=True).first()
    if team_id is None:
        raise ExportNotFound(_("No such export."))
    return team_id


def statement_export_get(*, acting: Acting, pk: UUID | str) -> StatementExport:
    """One export of the acting team, for its owner and billing members."""
    acting.require(Action.EXPORT_LEDGER)
    export = StatementExport.objects.filter(pk=pk, team=acting.team).first()
    if export is None:
        raise ExportNotFound(_("No such export."))
    return export


def statement_export_for_download(*, acting: Acting, pk: UUID | str) -> StatementExport:
    """An export whose file can be read now; else why not, in words (expired: 410)."""
    export = statement_export_get(acting=acting, pk=pk)
    expired = export.state == ExportState.EXPIRED or (
        export.state == ExportState.READY
        and export.expires_at is not None
        and export.expires_at <= db_now()
    )
    if expired:
        assert export.expires_at is not None, "an export expires only once it was ready"
        raise ExportExpired(
            _(
                "This export expired at %(at)s: exports are kept for a few days. Prepare a new "
                "one from the statement page."
            )
            % {"at": when_text(export.expires_at)}
        )
    if export.state == ExportState.FAILED:
        raise ExportFailed(_("This export failed. Prepare it again from the statement page."))
    if export.state != ExportState.READY:
        raise ExportNotReady(
            _("This export is still being prepared: you will get a notice when it is ready.")
        )
    return export


def statement_export_chunks(*, export: StatementExport) -> Iterator[bytes]:
    """The export's CSV, read a part at a time and unzipped in pieces of OUT_BYTES."""
    gunzip = zlib.decompressobj(31)
    for seq in range(export.parts):
        data = bytes(
            StatementExportPart.objects.filter(export=export, seq=seq)
            .values_list("data", flat=True)
            .get()
        )
        while data:
            if out := gunzip.decompress(data, OUT_BYTES):
                yield out
            data = gunzip.unconsumed_tail
    if tail := gunzip.flush():
        yield tail
