"""Issuing invoices and credit notes, and sending them to KSeF.

`invoices_issue` runs inside the transaction that wrote the ledger rows (it hears
`rentals.signals.ledger_entries_recorded`): one statement, `invoices.sql.ISSUE`, numbers and
writes every document and its lines. Sending to KSeF is a separate step after commit
(`ksef_submit`, a Celery task), off unless `INVOICES["KSEF_ENABLED"]`.
"""

import json
import logging
from datetime import timedelta

import httpx
from django.conf import settings
from django.db import connection, transaction

from core.db import db_now
from invoices import sql
from invoices.errors import XmlInvalid
from invoices.fa3 import invoice_xml
from invoices.models import Invoice, InvoiceKind, KsefStatus, KsefSubmission
from invoices.texts import legal_notes
from rentals.models import LedgerEntry, LedgerKind, LedgerReason

log = logging.getLogger(__name__)

KSEF_MAX_ATTEMPTS = 6


def seller_details() -> dict:
    """The seller as the settings say now; each document keeps its own copy."""
    seller = settings.ANCHORGPU["SELLER"]
    return {
        "name": seller["NAME"],
        "address": seller["ADDRESS"],
        "country": seller["COUNTRY"],
        "vat_id": seller["VAT_ID"],
        "bank_account": seller["BANK_ACCOUNT"],
    }


def seller_is_polish() -> bool:
    return settings.ANCHORGPU["SELLER"]["COUNTRY"] == "PL"


def invoices_issue(*, entry_ids: list[int], charges_only: bool = False) -> list[int]:
    """Issue the documents these ledger rows call for (an invoice per charge, credit notes
    for refunds and credits), inside the caller's transaction; their ids. Declares no
    transaction: it commits or rolls back with the ledger rows. `charges_only`: the rows are
    all charges (a booking's, an extension's), issued by the smaller statement."""
    if not entry_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            sql.ISSUE_CHARGES if charges_only else sql.ISSUE,
            {
                "entries": list(entry_ids),
                "tz": settings.INVOICES["TIME_ZONE"],
                "series": settings.ANCHORGPU["SELLER"]["INVOICE_SERIES"],
                "credit_series": settings.INVOICES["CREDIT_NOTE_SERIES"],
                "seller": json.dumps(seller_details()),
                "notes": json.dumps(legal_notes()),
                "invoice": InvoiceKind.INVOICE,
                "credit_note": InvoiceKind.CREDIT_NOTE,
                "charge": LedgerKind.CHARGE,
                "refund": LedgerKind.REFUND,
                "credit": LedgerKind.CREDIT,
                "booking": LedgerReason.BOOKING,
                "extension": LedgerReason.EXTENSION,
                "pln": "PLN",
                "from_quote": sql.FROM_QUOTE,
                "mirrored": sql.MIRRORED,
                "credited": sql.CREDITED,
                "impaired": "impaired",
            },
        )
        ids = [row[0] for row in cursor.fetchall()]
    return ids


@transaction.atomic
def invoices_issue_missing() -> int:
    """Documents for ledger rows that have none (rows older than this app, a demo's history):
    charges first, then what corrects them. How many were issued."""
    with connection.cursor() as cursor:
        cursor.execute(sql.UNDOCUMENTED, {"charge": LedgerKind.CHARGE})
        entry_ids = [row[0] for row in cursor.fetchall()]
    charges = set(
        LedgerEntry.objects.filter(pk__in=entry_ids, kind=LedgerKind.CHARGE).values_list(
            "pk", flat=True
        )
    )
    issued = invoices_issue(entry_ids=sorted(charges))
    rest = [pk for pk in entry_ids if pk not in charges]
    return len(issued) + len(invoices_issue(entry_ids=rest))


# --- KSeF ---------------------------------------------------------------------------------


def ksef_enabled() -> bool:
    return settings.INVOICES["KSEF_ENABLED"] and seller_is_polish()


def ksef_queue(*, invoice_ids: list[int]) -> None:
    """A pending submission per document, inside the caller's transaction; the caller
    enqueues `ksef_submit_task` after commit (invoices.receivers)."""
    now = db_now()
    KsefSubmission.objects.bulk_create(
        [KsefSubmission(invoice_id=pk, updated_at=now) for pk in invoice_ids],
        ignore_conflicts=True,
    )


class KsefRetry(Exception):
    """KSeF (or the way there) failed; the task tries again later."""


def ksef_submit(*, invoice_id: int) -> KsefSubmission:
    """Send one document's FA(3) XML to KSeF and record what came back. No lock is held
    while the request is out; a document already accepted is not sent again."""
    submission = _ksef_claim(invoice_id=invoice_id)
    if submission.status == KsefStatus.ACCEPTED:
        return submission
    invoice = Invoice.objects.select_related("corrects").get(pk=invoice_id)
    try:
        body = invoice_xml(invoice)
    except XmlInvalid as exc:
        return _ksef_record(invoice_id=invoice_id, status=KsefStatus.FAILED, error=str(exc))
    config = settings.INVOICES
    try:
        response = httpx.post(
            f"{config['KSEF_URL']}/invoices",
            content=body,
            headers={
                "Authorization": f"Bearer {config['KSEF_TOKEN']}",
                "Content-Type": "application/xml",
            },
            timeout=config["KSEF_TIMEOUT"],
        )
    except httpx.HTTPError as exc:
        _ksef_record(
            invoice_id=invoice_id, status=KsefStatus.FAILED, error=f"{type(exc).__name__}: {exc}"
        )
        raise KsefRetry(str(exc)) from exc
    if response.status_code in (200, 201, 202):
        try:
            number = str(response.json()["ksefNumber"])
        except (ValueError, KeyError, TypeError):
            number = ""
        if number:
            return _ksef_record(invoice_id=invoice_id, status=KsefStatus.ACCEPTED, number=number)
    error = f"HTTP {response.status_code}: {response.text[:500]}"
    _ksef_record(invoice_id=invoice_id, status=KsefStatus.FAILED, error=error)
    if response.status_code >= 500 or response.status_code == 429:
        raise KsefRetry(error)
    return KsefSubmission.objects.get(invoice_id=invoice_id)


@transaction.atomic
def _ksef_claim(*, invoice_id: int) -> KsefSubmission:
    now = db_now()
    submission, _created = KsefSubmission.objects.select_for_update().get_or_create(
        invoice_id=invoice_id, defaults={"updated_at": now}
    )
    if submission.status != KsefStatus.ACCEPTED:
        submission.attempts += 1
        submission.updated_at = now
        submission.save(update_fields=["attempts", "updated_at"])
    return submission


@transaction.atomic
def _ksef_record(*, invoice_id: int, status: str, number: str = "", error: str = ""):
    now = db_now()
    submission = KsefSubmission.objects.select_for_update().get(invoice_id=invoice_id)
    submission.status = status
    submission.error = error
    submission.updated_at = now
    if number:
        submission.ksef_number = number
        submission.sent_at = now
    submission.save(update_fields=["status", "error", "updated_at", "ksef_number", "sent_at"])
    return submission


def ksef_retry_in(attempts: int) -> timedelta:
    """Back off: 30 s, 1 min, 2 min … (the task's countdown)."""
    return timedelta(seconds=30 * 2 ** max(attempts - 1, 0))
