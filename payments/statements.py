"""Bank statements: camt.053 (pycamt) and MT940 (mt-940, with the Polish `:86:` sub-fields
`~20`…`~63` read as its `?` ones). Each credit is matched to a team's invoices, first by an
invoice number in its title (also the split-payment `/INV/…` field), then by an amount
that exactly one unpaid invoice asks; it is applied to them on the cash ledger (a partial
payment leaves the invoice partially paid, an over-payment stays as the team's credit).
What matches nothing waits for staff (`TransferState.UNMATCHED`). A transfer is stored
once by its bank reference: importing a statement again changes nothing."""

import hashlib
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation

import mt940
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from pycamt.parser import Camt053Parser

from core.db import db_now
from core.money import minor_units
from invoices.models import Invoice, InvoiceKind, PaymentSource
from invoices.selectors import invoice_owed, with_payment_facts
from payments.errors import StatementInvalid
from payments.models import (
    BankStatement,
    BankTransfer,
    CashEntry,
    CashKind,
    CashSource,
    TransferState,
)
from payments.services import cash_apply

MAX_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class Credit:
    reference: str
    booked_on: date
    amount: Decimal
    currency: str
    title: str
    counterparty: str


def _polish_details(transactions, tag, tag_dict, *args):
    """Polish banks separate `:86:` sub-fields with `~` (or `^`); mt-940 reads `?`."""
    details = tag_dict.get("transaction_details") or ""
    tag_dict["transaction_details"] = details.replace("~", "?").replace("^", "?")
    return tag_dict


def _digest_ref(*parts) -> str:
    return "h:" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:40]


def _mt940(text: str) -> list[Credit]:
    statement = mt940.models.Transactions(processors={"pre_transaction_details": [_polish_details]})
    statement.parse(text)
    if not len(statement.transactions):
        raise StatementInvalid(_("The MT940 file holds no transactions."), field="file")
    account = statement.data.get("account_identification", "")
    credits = []
    for position, tr in enumerate(statement.transactions):
        amount = tr.data["amount"]
        if amount.amount <= 0:
            continue  # a debit: not money received
        bank_ref = tr.data.get("bank_reference") or ""
        reference = (
            f"mt940:{account}:{bank_ref}:{tr.data['date']}"
            if bank_ref and bank_ref != "NONREF"
            else _digest_ref(
                account, tr.data["date"], amount.amount, tr.data.get("purpose"), position
            )
        )
        credits.append(
            Credit(
                reference=reference[:200],
                booked_on=tr.data["date"],
                amount=Decimal(str(amount.amount)),
                currency=amount.currency,
                title=tr.data.get("purpose") or "",
                counterparty=tr.data.get("applicant_name") or "",
            )  # fmt: skip
        )
    return credits


def _camt(content: bytes) -> list[Credit]:
    parser = Camt053Parser(content)
    credits = []
    for position, tx in enumerate(parser.get_transactions()):
        if tx.get("CreditDebitIndicator") != "CRDT" or tx.get("ReversalIndicator") == "true":
            continue
        try:
            amount = Decimal(tx.get("Amount") or "")
        except InvalidOperation as exc:
            raise StatementInvalid(_("A credit has no readable amount."), field="file") from exc
        booked = tx.get("BookingDate") or tx.get("ValueDate") or ""
        ref = tx.get("TransactionID") or tx.get("EndToEndId")
        reference = (
            f"camt:{tx.get('AccountIBAN')}:{ref}"
            if ref and ref != "NOTPROVIDED"
            else _digest_ref(
                tx.get("AccountIBAN"), booked, amount, tx.get("RemittanceInformationFull"), position
            )
        )
        credits.append(
            Credit(
                reference=reference[:200],
                booked_on=date.fromisoformat(booked[:10]),
                amount=amount,
                currency=tx.get("Currency") or "",
                title=tx.get("RemittanceInformationFull") or tx.get("RemittanceInformation") or "",
                counterparty=tx.get("DebtorName") or "",
            )  # fmt: skip
        )
    return credits


def statement_parse(content: bytes) -> tuple[str, list[Credit]]:
    """(format, credits) of a camt.053 or MT940 file; anything else refused in words."""
    if not content or len(content) > MAX_BYTES:
        raise StatementInvalid(_("Upload a camt.053 or MT940 file of at most 10 MB."), field="file")
    head = content.lstrip()[:400]
    try:
        if head.startswith(b"<"):
            fmt, credits = "camt053", _camt(content)
        else:
            text = content.decode("utf-8", errors="strict")
            if ":20:" not in text or ":61:" not in text:
                raise StatementInvalid(
                    _("This is neither a camt.053 nor an MT940 statement."), field="file"
                )
            fmt, credits = "mt940", _mt940(text)
    except StatementInvalid:
        raise
    except Exception as exc:  # the parsers' own errors: a file they cannot read
        raise StatementInvalid(
            _("The statement could not be read (%(error)s).") % {"error": type(exc).__name__},
            field="file",
        ) from exc
    for credit in credits:
        _credit_check(credit)
    return fmt, credits


def _credit_check(credit: Credit) -> None:
    try:
        places = minor_units(credit.currency)
    except ValueError as exc:
        raise StatementInvalid(
            _("%(currency)s is not a currency.") % {"currency": credit.currency}, field="file"
        ) from exc
    if credit.currency not in accepted_currencies():
        raise StatementInvalid(
            _("A credit in %(currency)s: we invoice in %(ours)s only.")
            % {"currency": credit.currency, "ours": ", ".join(sorted(accepted_currencies()))},
            field="file",
        )
    if credit.amount != credit.amount.quantize(Decimal(1).scaleb(-places)):
        raise StatementInvalid(
            _("%(amount)s %(currency)s has more decimal places than its currency.")
            % {"amount": credit.amount, "currency": credit.currency},
            field="file",
        )


def accepted_currencies() -> set[str]:
    return {
        settings.ANCHORGPU["CURRENCY"],
        "PLN",
        *Invoice.objects.values_list("currency", flat=True).distinct(),
    }


def _numbers_in(title: str) -> list[str]:
    """Invoice numbers named in a transfer's title, as `display_number`s (also inside the
    split-payment `/INV/…/` field, and glued to other words as banks print them)."""
    series = re.escape(settings.ANCHORGPU["SELLER"]["INVOICE_SERIES"])
    found = re.findall(rf"{series}\s*/\s*(\d{{4}})\s*/\s*(\d{{1,6}})", title.upper())
    return [f"{settings.ANCHORGPU['SELLER']['INVOICE_SERIES']}/{y}/{int(n):06d}" for y, n in found]


def _match(credit: Credit) -> tuple[list[Invoice], str]:
    numbers = _numbers_in(credit.title)
    if numbers:
        invoices = list(
            Invoice.objects.filter(
                display_number__in=numbers, kind=InvoiceKind.INVOICE, currency=credit.currency
            ).order_by("issued_at", "id")
        )
        teams = {i.team_id for i in invoices}
        if invoices and len(teams) == 1:
            return invoices, "number"
        return [], ""
    asking: list[Invoice] = [
        i
        for i in with_payment_facts(
            Invoice.objects.filter(
                kind=InvoiceKind.INVOICE, currency=credit.currency, due_on__isnull=False
            )
        )
        if invoice_owed(i) == credit.amount
    ]
    if len(asking) == 1:
        return asking, "amount"
    return [], ""


def statement_import(*, content: bytes, filename: str = "", user=None) -> dict:
    """Import one statement; back: {imported, matched, unmatched, duplicates}."""
    fmt, credits = statement_parse(content)
    digest = hashlib.sha256(content).hexdigest()
    counts = {"imported": 0, "matched": 0, "unmatched": 0, "duplicates": 0}
    with transaction.atomic():
        statement, _created = BankStatement.objects.get_or_create(
            digest=digest, defaults={"format": fmt, "filename": filename[:200], "uploaded_by": user}
        )
        for credit in credits:
            if BankTransfer.objects.filter(reference=credit.reference).exists():
                counts["duplicates"] += 1
                continue
            transfer = transfer_record(statement=statement, credit=credit)
            counts["imported"] += 1
            counts["matched" if transfer.state == TransferState.MATCHED else "unmatched"] += 1
    return counts


def transfer_record(*, statement: BankStatement, credit: Credit) -> BankTransfer:
    invoices, how = _match(credit)
    team_id = invoices[0].team_id if invoices else None
    transfer = BankTransfer.objects.create(
        statement=statement, reference=credit.reference, booked_on=credit.booked_on,
        amount=credit.amount, currency=credit.currency, title=credit.title[:2000],
        counterparty=credit.counterparty[:300],
        state=TransferState.MATCHED if invoices else TransferState.UNMATCHED,
        team_id=team_id, matched_by=how,
    )  # fmt: skip
    if invoices:
        _receive(transfer, invoices[0].team_id, invoices)
    return transfer


def _receive(transfer: BankTransfer, team_id: int, invoices: list[Invoice], user=None) -> None:
    now = db_now()
    CashEntry.objects.create(
        team_id=team_id, currency=transfer.currency, kind=CashKind.RECEIVED,
        source=CashSource.TRANSFER, amount=transfer.amount, at=now, transfer=transfer,
        reference=transfer.reference, recorded_by=user,
    )  # fmt: skip
    cash_apply(
        team_id=team_id, currency=transfer.currency, amount=transfer.amount, invoices=invoices,
        source=PaymentSource.TRANSFER, reference=transfer.reference, at=now,
    )  # fmt: skip


@transaction.atomic
def transfer_assign(*, user, transfer_id: int, invoice_number: str) -> BankTransfer:
    """Staff match an unmatched transfer to an invoice (its team's; the rest stays credit)."""
    if not getattr(user, "is_staff", False):
        raise StatementInvalid(_("Only staff match transfers."))
    transfer = BankTransfer.objects.select_for_update().filter(pk=transfer_id).first()
    if transfer is None or transfer.state != TransferState.UNMATCHED:
        raise StatementInvalid(_("No such unmatched transfer."))
    invoice = Invoice.objects.filter(
        display_number=invoice_number.strip(),
        number__isnull=False,
        kind=InvoiceKind.INVOICE,
        currency=transfer.currency,
    ).first()
    if invoice is None:
        raise StatementInvalid(
            _("No invoice %(number)s in %(currency)s.")
            % {"number": invoice_number, "currency": transfer.currency},
            field="invoice",
        )
    BankTransfer.objects.filter(pk=transfer.pk).update(
        state=TransferState.MATCHED, team_id=invoice.team_id, matched_by="staff"
    )
    transfer.refresh_from_db()
    _receive(transfer, invoice.team_id, [invoice], user=user)
    return transfer
