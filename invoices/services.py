"""Issuing invoices and credit notes, and sending them to KSeF.

`invoices_issue` runs inside the transaction that wrote the ledger rows (it hears
`rentals.signals.ledger_entries_recorded`): one statement, `invoices.sql.ISSUE`, writes every
document and its lines, not yet numbered. `invoices_number` numbers them after that commit
(`invoices_number_task`: cued after each commit, and every few seconds), in the order of
their transactions, gapless. Sending to KSeF follows the number
(`ksef_submit`, a Celery task), off unless `INVOICES["KSEF_ENABLED"]`.
"""

import json
import logging
import math
import zoneinfo
from datetime import date, timedelta
from decimal import Decimal

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Q
from django.utils.translation import gettext as _

from accounts.models import BillingMode
from catalog.models import GpuPrice, OptionPrice
from core.db import db_now
from core.money import default_currency
from core.publish import publish, publish_once
from invoices import sql
from invoices.errors import XmlInvalid
from invoices.fa3 import invoice_xml
from invoices.models import (
    RATE_MAX_AGE_DAYS,
    ExchangeRate,
    HeldInvoice,
    Invoice,
    InvoiceKind,
    KsefStatus,
    KsefSubmission,
)
from invoices.selectors import HeldDay, invoices_held
from invoices.texts import legal_notes
from rentals.models import LedgerEntry, LedgerKind, LedgerReason
from rentals.texts import reader_preferences

log = logging.getLogger(__name__)

KSEF_MAX_ATTEMPTS = 6


def seller_details() -> dict[str, str]:
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
    country: str = settings.ANCHORGPU["SELLER"]["COUNTRY"]
    return country == "PL"


def invoices_issue(*, entry_ids: list[int], charges_only: bool = False) -> list[int]:
    """Issue the documents these ledger rows call for (an invoice per charge, credit notes
    for refunds and credits), inside the caller's transaction; their ids. Declares no
    transaction: it commits or rolls back with the ledger rows, unnumbered, and cues their
    numbering after the commit. `charges_only`: the rows are
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
                "needs_rate": seller_is_polish(),
                "rate_days": RATE_MAX_AGE_DAYS,
                "from_quote": sql.FROM_QUOTE,
                "mirrored": sql.MIRRORED,
                "credited": sql.CREDITED,
                "impaired": "impaired",
                "invoiced_mode": BillingMode.INVOICED,
            },
        )
        ids = [row[0] for row in cursor.fetchall()]
    if ids:  # numbered (then sent to KSeF) after the commit: invoices_number_task
        transaction.on_commit(lambda: publish_once("invoices.tasks.invoices_number_task"))
    return ids


@transaction.atomic
def invoices_number() -> list[int]:
    """Number every committed document that waits for its number and that no earlier open
    transaction could still precede (invoices.sql.NUMBER); their ids. One run at a time: a
    run that finds another going returns at once (that one, or the next, numbers these).
    Numbered documents are queued for KSeF."""
    with connection.cursor() as cursor:
        cursor.execute(sql.NUMBERING_LOCK_TAKE, {"lock": sql.NUMBERING_LOCK})
        if not cursor.fetchone()[0]:
            return []
        cursor.execute(
            sql.NUMBER,
            {"tz": settings.INVOICES["TIME_ZONE"]},
        )
        ids = sorted(row[0] for row in cursor.fetchall())
    if ids and ksef_enabled():
        ksef_queue(invoice_ids=ids)
        transaction.on_commit(lambda: publish("invoices.tasks.ksef_submit_task", ids))
    return ids


@transaction.atomic
def invoices_issue_missing() -> int:
    """Documents for ledger rows that have none (rows older than this app, a demo's history,
    charges held for an exchange rate that now exists): charges first, then what corrects
    them. How many were issued. Staff adding a rate in the admin runs it, and the hourly
    `invoices_catch_up_task`."""
    with connection.cursor() as cursor:
        cursor.execute(
            sql.UNDOCUMENTED,
            {
                "charge": LedgerKind.CHARGE,
                "refund": LedgerKind.REFUND,
                "invoice": InvoiceKind.INVOICE,
            },
        )
        entry_ids = [row[0] for row in cursor.fetchall()]
    charges = set(
        LedgerEntry.objects.filter(pk__in=entry_ids, kind=LedgerKind.CHARGE).values_list(
            "pk", flat=True
        )
    )
    issued = invoices_issue(entry_ids=sorted(charges))
    rest = [pk for pk in entry_ids if pk not in charges]
    return len(issued) + len(invoices_issue(entry_ids=rest))


# --- Invoices held for an exchange rate -------------------------------------------------


def invoices_held_among(*, entry_ids: list[int]) -> bool:
    """Whether any of these ledger rows' invoices was held and staff were not told yet."""
    return HeldInvoice.objects.filter(ledger_entry_id__in=entry_ids, alerted_at=None).exists()


def invoices_held_alert() -> int:
    """Tell the staff who keep the exchange rates (staff with `invoices.add_exchangerate`,
    superusers) which invoices are held, once per held charge; how many were told of. The
    rows are claimed in a short transaction and the mail sent after it; a mail that fails
    gives them back for the next run."""
    now = db_now()
    with transaction.atomic():
        claimed = list(
            HeldInvoice.objects.select_for_update(skip_locked=True)
            .filter(alerted_at=None)
            .values_list("pk", flat=True)
        )
        HeldInvoice.objects.filter(pk__in=claimed).update(alerted_at=now)
    if not claimed:
        return 0
    days = invoices_held()
    recipients = _rate_keepers()
    if not recipients:
        log.error("%s invoices are held for an exchange rate and no staff member keeps the rates",
                  len(claimed))  # fmt: skip
        return len(claimed)
    try:
        for user in recipients:
            with reader_preferences(user):
                send_mail(
                    _("AnchorGPU: invoices held for want of an exchange rate"),
                    held_text(days), None, [user.email],
                )  # fmt: skip
    except Exception:
        HeldInvoice.objects.filter(pk__in=claimed, alerted_at=now).update(alerted_at=None)
        raise
    return len(claimed)


def _rate_keepers() -> list[User]:
    permission = Permission.objects.filter(
        content_type__app_label="invoices", codename="add_exchangerate"
    ).first()
    who = Q(is_superuser=True)
    if permission is not None:
        who |= Q(user_permissions=permission) | Q(groups__permissions=permission)
    return list(
        get_user_model()
        .objects.filter(who, is_active=True, is_staff=True)
        .exclude(email="")
        .distinct()
        .order_by("pk")
    )


def held_text(days: list[HeldDay]) -> str:
    """What staff read of the held invoices, in the active language."""
    head = _(
        "These invoices are not issued yet: their VAT must also be stated in PLN at the NBP "
        "rate (table A) of the last business day before the sale, and no such rate has been "
        "entered."
    )
    lines = [
        _(
            "%(currency)s, sold on %(sold_on)s: %(count)s held; a rate of a day from "
            "%(rate_from)s to %(rate_until)s is needed."
        )
        % {
            "currency": d.currency,
            "sold_on": d.sold_on.isoformat(),
            "count": d.invoices,
            "rate_from": d.rate_from.isoformat(),
            "rate_until": d.rate_until.isoformat(),
        }  # fmt: skip
        for d in days
    ]
    tail = _(
        "Enter the rates in the admin (Invoices → Exchange rates, /admin/invoices/"
        "exchangerate/add/): the held invoices are issued at once."
    )
    return "\n\n".join([head, "\n".join(f"- {line}" for line in lines), tail])


# --- KSeF ---------------------------------------------------------------------------------


def ksef_enabled() -> bool:
    return settings.INVOICES["KSEF_ENABLED"] and seller_is_polish()


def ksef_queue(*, invoice_ids: list[int]) -> None:
    """A pending submission per document, inside the caller's transaction; the caller
    enqueues `ksef_submit_task` after commit (`invoices_number`)."""
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
def _ksef_record(
    *, invoice_id: int, status: str, number: str = "", error: str = ""
) -> KsefSubmission:
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


# --- The demo's exchange rates --------------------------------------------------------------

# PLN per unit, about NBP's table A of late 2026; the demo's rates wander a little around them.
DEMO_RATES = {
    "USD": Decimal("3.65"), "EUR": Decimal("4.22"), "GBP": Decimal("4.86"),
    "CHF": Decimal("4.55"), "JPY": Decimal("0.0239"), "CZK": Decimal("0.171"),
    "SEK": Decimal("0.385"), "NOK": Decimal("0.36"), "DKK": Decimal("0.566"),
    "CAD": Decimal("2.62"), "AUD": Decimal("2.38"), "KWD": Decimal("11.9"),
}  # fmt: skip


def exchange_rates_demo_keep(*, days: int = 40) -> int:
    """The demo only (ANCHORGPU_DEMO): a made-up rate for each business day of the last
    `days` and today, for every currency the catalog prices in (PLN aside), so the demo's
    foreign-currency invoices carry their VAT in PLN rather than wait for staff. Rates staff
    entered are kept. Marked "(demo)" in their table number, which the PDF prints. How many
    were added."""
    if not settings.ANCHORGPU["DEMO"]:
        return 0
    currencies = sorted(
        (set(GpuPrice.objects.values_list("currency", flat=True).distinct())
         | set(OptionPrice.objects.values_list("currency", flat=True).distinct())
         | {default_currency()}) - {"PLN"}
    )  # fmt: skip
    today = db_now().astimezone(zoneinfo.ZoneInfo(settings.INVOICES["TIME_ZONE"])).date()
    rows = []
    for currency in currencies:
        base = DEMO_RATES.get(currency)
        if base is None:
            log.warning("the demo has no exchange rate for %s: its invoices are held", currency)
            continue
        for back in range(days, -1, -1):
            day = today - timedelta(days=back)
            if day.weekday() >= 5:  # NBP publishes on business days
                continue
            wander = Decimal(math.sin(day.toordinal() / 5)).quantize(Decimal("0.0001"))
            rows.append(
                ExchangeRate(
                    currency=currency, effective_on=day,
                    rate=(base * (1 + wander / 100)).quantize(Decimal("0.000001")),
                    table_no=f"{_business_day_of_year(day):03d}/A/NBP/{day.year} (demo)",
                )
            )  # fmt: skip
    before = ExchangeRate.objects.count()
    ExchangeRate.objects.bulk_create(rows, ignore_conflicts=True)
    return ExchangeRate.objects.count() - before


def _business_day_of_year(day: date) -> int:
    first = day.replace(month=1, day=1)
    return sum(1 for n in range((day - first).days + 1) if (first + timedelta(n)).weekday() < 5)
