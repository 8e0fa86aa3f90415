"""Getting paid: cards, a purchase's card payment (authorise, book, capture or cancel), the
cash ledger, and applying money to invoices.

The purchase path (rentals.purchase_hooks, connected by anchorgpu/wiring.py):
1. `payment_authorise`, before the purchase's transaction and outside any lock: the quote's
   gross on the team's default card, one PaymentIntent per Idempotency-Key (Stripe's own
   Idempotency-Key header is sent too);
2. `purchase_check`, in the purchase's transaction: the authorisation is marked booked (a
   card team), or the credit limit and overdue invoices are checked (an invoiced team);
3. `purchase_settle`, after the commit: what was booked is captured (a failed capture is
   retried by `payment_capture_task`), an unused authorisation is cancelled.
"""

import contextlib
import functools
import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import stripe
from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Sum
from django.utils.translation import gettext as _
from stripe.params import PaymentIntentCreateParams

from accounts.models import BillingMode, Team
from accounts.roles import Acting, Action
from core.db import db_now
from core.errors import as_invalid
from core.money import amount_check
from invoices.models import Invoice, InvoiceKind, InvoicePayment, PaymentSource
from invoices.selectors import invoice_owed, invoice_today, with_payment_facts
from payments import processor
from payments import sql as payments_sql
from payments.errors import (
    CardInvalid,
    CardMissing,
    CardUnknown,
    CreditLimitExceeded,
    InvoiceOverdue,
    PaymentConflict,
    PaymentDeclined,
    PaymentNotAuthorised,
    PaymentRequiresAction,
    ProcessorUnavailable,
)
from payments.models import (
    Card,
    CashEntry,
    CashKind,
    CashSource,
    Payment,
    PaymentState,
    ProcessorCustomer,
)
from rentals.errors import KeyReused
from rentals.models import Quote

log = logging.getLogger(__name__)


# --- Cards --------------------------------------------------------------------------------


def _customer_id(team: Team) -> str:
    """The team's customer at the processor, made on first need."""
    found = ProcessorCustomer.objects.filter(team=team).first()
    if found:
        return found.customer_id
    customer = processor.call(
        processor.client().v1.customers.create,
        {"description": f"AnchorGPU team {team.pk}", "metadata": {"team": str(team.pk)}},
        {"idempotency_key": f"anchorgpu-customer-{team.pk}"},
    )
    try:
        with transaction.atomic():
            ProcessorCustomer.objects.create(team=team, customer_id=customer.id)
    except IntegrityError:
        return ProcessorCustomer.objects.get(team=team).customer_id
    return customer.id


def card_setup_intent(*, acting: Acting) -> dict[str, str | None]:
    """A SetupIntent's client secret, for Stripe.js to collect a card straight into the
    processor (card data never touches our servers)."""
    acting.require(Action.MANAGE_CARDS)
    intent = processor.call(
        processor.client().v1.setup_intents.create,
        # The API takes payment_method_types; stripe's typed parameters no longer name it.
        {"customer": _customer_id(acting.team), "payment_method_types": ["card"]},  # type: ignore[arg-type]
    )
    return {"id": intent.id, "client_secret": intent.client_secret}


def card_save(*, acting: Acting, payment_method: str, make_default: bool = True) -> Card:
    """Attach a card (the processor's `pm_…`, from Stripe.js or a test token) to the team:
    only its brand, last four digits and expiry are stored. The first card is the default."""
    acting.require(Action.MANAGE_CARDS)
    if not isinstance(payment_method, str) or not payment_method.startswith("pm_"):
        raise CardInvalid(
            _("Give the processor's payment method id (pm_…)."), field="payment_method"
        )
    existing = Card.objects.filter(processor_id=payment_method).first()
    if existing is not None and existing.team_id != acting.team.pk:
        raise CardUnknown(_("No such card."), field="payment_method")
    if existing is not None and existing.removed_at is None:
        return existing
    api = processor.client().v1.payment_methods
    customer = _customer_id(acting.team)
    try:
        method = processor.call(api.retrieve, payment_method)
        if getattr(method, "customer", None) not in (None, customer):
            raise CardUnknown(_("No such card."), field="payment_method")
        if getattr(method, "customer", None) is None:
            method = processor.call(api.attach, payment_method, {"customer": customer})
    except stripe.CardError as exc:
        raise CardInvalid(
            exc.user_message or _("The card was declined."), field="payment_method"
        ) from exc
    except stripe.InvalidRequestError as exc:
        raise CardUnknown(_("The processor knows no such card."), field="payment_method") from exc
    if method.type != "card" or method.card is None:
        raise CardInvalid(_("Only cards can be saved."), field="payment_method")
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=acting.team.pk)
        has_default = Card.objects.filter(team=team, is_default=True, removed_at=None).exists()
        if make_default and has_default:
            Card.objects.filter(team=team, is_default=True, removed_at=None).update(
                is_default=False
            )
        card = Card.objects.create(
            team=team, processor_id=payment_method, brand=method.card.brand,
            last4=method.card.last4, exp_month=method.card.exp_month,
            exp_year=method.card.exp_year, is_default=make_default or not has_default,
        )  # fmt: skip
    return card


def _own_card(acting: Acting, pk: int) -> Card:
    card = Card.objects.filter(team=acting.team, pk=pk, removed_at=None).first()
    if card is None:
        raise CardUnknown(_("There is no such card in this team."))
    return card


@transaction.atomic
def card_default_set(*, acting: Acting, pk: int) -> Card:
    acting.require(Action.MANAGE_CARDS)
    card = _own_card(acting, pk)
    Team.objects.select_for_update().get(pk=acting.team.pk)
    Card.objects.filter(team=acting.team, is_default=True, removed_at=None).update(is_default=False)
    Card.objects.filter(pk=card.pk).update(is_default=True)
    card.is_default = True
    return card


def card_remove(*, acting: Acting, pk: int) -> None:
    """Detach a card at the processor and keep its row (payments name it). Another card
    becomes the default."""
    acting.require(Action.MANAGE_CARDS)
    card = _own_card(acting, pk)
    with contextlib.suppress(stripe.InvalidRequestError):  # already detached there
        processor.call(processor.client().v1.payment_methods.detach, card.processor_id)
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=acting.team.pk)
        Card.objects.filter(pk=card.pk).update(removed_at=db_now(), is_default=False)
        if card.is_default:
            other = Card.objects.filter(team=acting.team, removed_at=None).order_by("-created_at")
            first = other.first()
            if first:
                Card.objects.filter(pk=first.pk).update(is_default=True)


# --- A purchase's card payment ---------------------------------------------------------


def payment_authorise(*, acting: Acting, quote_id: UUID | str | None, key: str) -> Payment | None:
    """Authorise the quote's gross on the team's default card, once per (team, key): the key
    is bound to one PaymentIntent. None: the team is invoiced, or the quote is not the
    team's (the purchase refuses it in words). Raises PaymentDeclined (final),
    PaymentRequiresAction (3-D Secure: not final), CardMissing, ProcessorUnavailable."""
    team = acting.team
    if team.billing_mode != BillingMode.CARD or quote_id is None:
        return None
    existing = Payment.objects.filter(team=team, idempotency_key=key).first()
    if existing is not None:
        return _authorised_again(existing, quote_id)
    try:
        quote = Quote.objects.filter(pk=quote_id, team=team).first()
    except (ValueError, TypeError, ValidationError):  # a malformed id: the purchase words it
        return None
    if quote is None:
        return None
    acting.require(Action.BOOK)
    card = Card.objects.filter(team=team, is_default=True, removed_at=None).first()
    if card is None:
        raise CardMissing(
            _("This team pays by card: save a card on the team's billing page, then retry."),
            extra={"cards_url": f"/teams/{team.pk}/billing/"},
        )
    try:
        amount = processor.to_minor(quote.total, quote.currency)
    except ValueError as exc:
        raise PaymentNotAuthorised(str(exc)) from exc
    payment, created = _payment_claim(acting, key, quote, card)
    if not created:
        return _authorised_again(payment, quote_id)
    params: PaymentIntentCreateParams = {
        "amount": amount, "currency": quote.currency.lower(),
        "customer": _customer_id(team), "payment_method": card.processor_id,
        "capture_method": "manual", "confirm": True,
        "metadata": {"team": str(team.pk), "quote": str(quote.pk), "key": key},
    }  # fmt: skip
    try:
        intent = processor.call(
            processor.client().v1.payment_intents.create,
            params,
            {"idempotency_key": f"anchorgpu-{team.pk}-{key}"},
        )
    except stripe.CardError as exc:
        error = exc.error
        intent_id = getattr(getattr(error, "payment_intent", None), "id", "") or ""
        Payment.objects.filter(pk=payment.pk).update(
            state=PaymentState.DECLINED, intent_id=intent_id,
            decline_code=(exc.code or "")[:60],
            decline_message=(exc.user_message or "")[:300],
        )  # fmt: skip
        payment.refresh_from_db()
        raise _declined(payment) from exc
    except ProcessorUnavailable:
        Payment.objects.filter(pk=payment.pk).delete()  # nothing was authorised: key stays free
        raise
    except stripe.InvalidRequestError as exc:  # the processor no longer knows the card
        Payment.objects.filter(pk=payment.pk).delete()
        raise CardMissing(
            _("The payment processor no longer knows the saved card: save it again, then retry."),
            extra={"cards_url": f"/teams/{team.pk}/billing/"},
        ) from exc
    return _intent_seen(payment, intent)


def _payment_claim(acting: Acting, key: str, quote: Quote, card: Card) -> tuple[Payment, bool]:
    try:
        with transaction.atomic():
            return (
                Payment.objects.create(
                    team=acting.team, user=acting.user,
                    idempotency_key=key, quote=quote, card=card, amount=quote.total,
                    currency=quote.currency,
                    state=PaymentState.REQUIRES_ACTION,  # until the processor answers
                ),
                True,
            )  # fmt: skip
    except IntegrityError:
        return Payment.objects.get(team=acting.team, idempotency_key=key), False


def _intent_seen(payment: Payment, intent: stripe.PaymentIntent) -> Payment:
    """Record what the processor says of the payment's intent, and answer for it."""
    status = intent.status
    fields = {"intent_id": intent.id, "client_secret": intent.client_secret or ""}
    if status == "requires_capture":
        fields["state"] = PaymentState.AUTHORISED
    elif status == "requires_action":
        fields["state"] = PaymentState.REQUIRES_ACTION
    elif status in ("requires_payment_method", "canceled"):
        error = getattr(intent, "last_payment_error", None) or {}
        fields["state"] = PaymentState.DECLINED
        fields["decline_message"] = (getattr(error, "message", None) or "")[:300]
    Payment.objects.filter(
        pk=payment.pk, state__in=[PaymentState.REQUIRES_ACTION, PaymentState.AUTHORISED]
    ).update(**fields)
    payment.refresh_from_db()
    if payment.state == PaymentState.REQUIRES_ACTION:
        raise _requires_action(payment)
    if payment.state == PaymentState.DECLINED:
        raise _declined(payment)
    return payment


def _authorised_again(payment: Payment, quote_id: UUID | str) -> Payment:
    """The same key again: its payment, as it now stands (3-D Secure done or not)."""
    if str(payment.quote_id) != str(quote_id):
        raise KeyReused(_("This Idempotency-Key was used for a different request; use a new key."))
    if payment.state == PaymentState.DECLINED:
        raise _declined(payment)
    if payment.state == PaymentState.REQUIRES_ACTION:
        if not payment.intent_id:
            raise PaymentConflict(
                _("The first request with this key is still running; retry shortly.")
            )
        intent = processor.call(processor.client().v1.payment_intents.retrieve, payment.intent_id)
        return _intent_seen(payment, intent)
    return payment


def _declined(payment: Payment) -> PaymentDeclined:
    words = payment.decline_message or _("The card was declined.")
    return PaymentDeclined(
        _("%(words)s Nothing was booked or charged; use another card.") % {"words": words},
        extra={"decline_code": payment.decline_code or "card_declined"},
    )


def _requires_action(payment: Payment) -> PaymentRequiresAction:
    return PaymentRequiresAction(
        _(
            "Your card asks for 3-D Secure. Complete it, then send the same request with the "
            "same Idempotency-Key: it books once."
        ),
        extra={
            "client_secret": payment.client_secret,
            "payment_intent": payment.intent_id,
            "complete_url": f"/payments/{payment.pk}/authenticate/",
        },
    )


def purchase_check(*, acting: Acting, quote: Quote, payment: object, at: datetime) -> None:
    """In the purchase's transaction: a card team's purchase needs its authorisation for
    exactly this quote (marked booked here, so it books once); an invoiced team's stays
    within its credit limit and is refused while an invoice is overdue."""
    team = acting.team
    if team.billing_mode == BillingMode.CARD:
        booked = 0
        if isinstance(payment, Payment):
            booked = Payment.objects.filter(
                pk=payment.pk, team=team, quote=quote.pk, amount=quote.total,
                currency=quote.currency, state=PaymentState.AUTHORISED,
            ).update(state=PaymentState.BOOKED)  # fmt: skip
        if not booked:
            raise PaymentNotAuthorised(
                _(
                    "This team pays by card, and this purchase was not authorised on a card: "
                    "book or extend from a quote, with a saved card."
                )
            )
        return
    credit_limit, any_overdue = _invoiced_terms(team=team, currency=quote.currency)
    overdue = invoices_overdue(team=team, at=at) if any_overdue else []
    if overdue:
        raise InvoiceOverdue(
            _(
                "Invoice %(number)s is overdue (due on %(due)s): new bookings and extensions "
                "wait until it is paid. Running rentals are not affected."
            )
            % {
                "number": overdue[0].display_number,
                # found by due_on__lt, so never None
                "due": overdue[0].due_on.isoformat() if overdue[0].due_on else "",
            },
            extra={"invoices": [i.display_number for i in overdue]},
        )
    if credit_limit is None:
        return
    Team.objects.select_for_update().filter(pk=team.pk).first()  # one purchase at a time
    owed = team_owed(team=team, currency=quote.currency)
    if owed + quote.total > credit_limit:
        raise CreditLimitExceeded(
            _(
                "This would take the team's unpaid invoices to %(total)s %(currency)s, over its "
                "credit limit of %(limit)s %(currency)s. Pay an invoice or ask us to raise it."
            )
            % {"total": owed + quote.total, "limit": credit_limit, "currency": quote.currency},
            extra={"owed": str(owed), "limit": str(credit_limit), "currency": quote.currency},
        )


def _invoiced_terms(*, team: Team, currency: str) -> tuple[Decimal | None, bool]:
    """(the team's credit limit in `currency` or None, whether an invoice is overdue), in one
    statement (`payments.sql.INVOICED_TERMS`); overdue as `invoices_overdue` counts it."""
    cutoff = invoice_today() - timedelta(days=team.grace_days)
    with connection.cursor() as cursor:
        cursor.execute(
            payments_sql.INVOICED_TERMS,
            {"team": team.pk, "currency": currency, "cutoff": cutoff,
             "invoice": InvoiceKind.INVOICE, "credit_note": InvoiceKind.CREDIT_NOTE},
        )  # fmt: skip
        credit_limit, overdue = cursor.fetchone()
    return credit_limit, overdue


def team_owed(*, team: Team, currency: str) -> Decimal:
    """What the team's invoices in `currency` still ask: their gross (credit notes negative)
    less what was applied to them."""
    gross = Invoice.objects.filter(team=team, currency=currency).aggregate(s=Sum("gross"))["s"]
    applied = InvoicePayment.objects.filter(team=team, currency=currency).aggregate(
        s=Sum("amount")
    )["s"]
    return (gross or Decimal(0)) - (applied or Decimal(0))


def invoices_overdue(*, team: Team, at: datetime | None = None) -> list[Invoice]:
    """The team's invoices past their due date (and its grace days) with money still owed."""
    today = invoice_today()
    cutoff = today - timedelta(days=team.grace_days)
    candidates = with_payment_facts(
        Invoice.objects.filter(team=team, kind=InvoiceKind.INVOICE, due_on__lt=cutoff)
    ).order_by("due_on", "id")
    return [i for i in candidates if invoice_owed(i) > 0]


def purchase_settle(*, payment: object) -> None:
    """After the purchase's commit: capture what was booked, cancel what was not used."""
    if not isinstance(payment, Payment):
        return
    state = Payment.objects.filter(pk=payment.pk).values_list("state", flat=True).first()
    if state == PaymentState.BOOKED:
        try:
            payment_capture(payment_id=payment.pk)
        except ProcessorUnavailable:
            _capture_later(payment.pk)
    elif state == PaymentState.AUTHORISED:
        payment_cancel(payment_id=payment.pk)


CAPTURE_TASK = "payments.tasks.payment_capture_task"
REFUND_TASK = "payments.tasks.credit_refund_task"


def _capture_later(payment_id: int) -> None:
    """Retry the capture in a task (by name: payments.tasks imports this module)."""
    transaction.on_commit(
        lambda: current_app.send_task(CAPTURE_TASK, args=(payment_id,), countdown=5)
    )


def payment_cancel(*, payment_id: int) -> Payment:
    """Cancel an authorisation the purchase did not use: nothing is charged."""
    payment = Payment.objects.get(pk=payment_id)
    if payment.state != PaymentState.AUTHORISED:
        return payment
    try:
        processor.call(
            processor.client().v1.payment_intents.cancel,
            payment.intent_id,
            None,
            {"idempotency_key": f"anchorgpu-cancel-{payment.intent_id}"},
        )
    except ProcessorUnavailable:
        log.warning("cancelling %s failed; the authorisation lapses by itself", payment.intent_id)
        return payment
    except stripe.InvalidRequestError:
        pass  # cancelled already
    Payment.objects.filter(pk=payment.pk, state=PaymentState.AUTHORISED).update(
        state=PaymentState.CANCELLED
    )
    payment.refresh_from_db()
    return payment


def payment_capture(*, payment_id: int) -> Payment:
    """Capture a booked payment (idempotent: the processor's key, and our state). A failed
    try counts; after PAYMENTS["CAPTURE_ATTEMPTS"] the payment shows as capture_failed to
    staff, and its invoice stays unpaid."""
    payment = Payment.objects.get(pk=payment_id)
    if payment.state not in (PaymentState.BOOKED, PaymentState.CAPTURE_FAILED):
        return payment
    api = processor.client().v1.payment_intents
    try:
        intent = processor.call(
            api.capture, payment.intent_id, None,
            {"idempotency_key": f"anchorgpu-capture-{payment.intent_id}"},
        )  # fmt: skip
    except ProcessorUnavailable as exc:
        _capture_failed(payment, str(exc))
        raise
    except stripe.InvalidRequestError as exc:
        intent = processor.call(api.retrieve, payment.intent_id)
        if intent.status != "succeeded":
            _capture_failed(payment, str(exc), final=True)
            return payment
    if intent.status != "succeeded":
        _capture_failed(payment, f"status {intent.status}", final=True)
        return payment
    return payment_captured(payment_id=payment.pk)


def _capture_failed(payment: Payment, error: str, *, final: bool = False) -> None:
    attempts = payment.capture_attempts + 1
    failed = final or attempts >= settings.PAYMENTS["CAPTURE_ATTEMPTS"]
    Payment.objects.filter(pk=payment.pk).update(
        capture_attempts=attempts,
        last_error=error[:300],
        **({"state": PaymentState.CAPTURE_FAILED} if failed else {}),
    )


@transaction.atomic
def payment_captured(*, payment_id: int) -> Payment:
    """The processor captured the payment: record the money received and apply it to the
    purchase's invoice. Once, whoever tells us (the capture's answer, a webhook)."""
    now = db_now()
    moved = Payment.objects.filter(
        pk=payment_id, state__in=[PaymentState.BOOKED, PaymentState.CAPTURE_FAILED]
    ).update(state=PaymentState.CAPTURED, captured_at=now)
    payment = Payment.objects.get(pk=payment_id)
    if not moved:
        return payment
    CashEntry.objects.create(
        team_id=payment.team_id, currency=payment.currency, kind=CashKind.RECEIVED,
        source=CashSource.CARD, amount=payment.amount, at=now, payment=payment,
        reference=payment.intent_id,
    )  # fmt: skip
    invoice = Invoice.objects.filter(
        kind=InvoiceKind.INVOICE, ledger_entry__quote_id=payment.quote_id
    ).first()
    if invoice is not None:
        cash_apply(
            team_id=payment.team_id, currency=payment.currency, amount=payment.amount,
            invoices=[invoice], source=PaymentSource.CARD, reference=payment.intent_id, at=now,
        )  # fmt: skip
    return payment


# --- The cash ledger ------------------------------------------------------------------------


def cash_apply(
    *,
    team_id: int,
    currency: str,
    amount: Decimal,
    invoices: list[Invoice],
    source: str,
    reference: str,
    at: datetime,
) -> Decimal:
    """Apply up to `amount` of the team's cash to these invoices, in order, each up to what it
    still asks (their rows locked); back: what is left unapplied (kept as the team's
    credit on the cash ledger)."""
    left = amount
    ids = [i.pk for i in invoices]
    locked = {
        i.pk: i for i in Invoice.objects.select_for_update().filter(pk__in=ids).order_by("pk")
    }
    facts = {i.pk: i for i in with_payment_facts(Invoice.objects.filter(pk__in=ids))}
    today = invoice_today()
    for invoice in invoices:
        if left <= 0 or invoice.pk not in locked:
            continue
        current = facts[invoice.pk]
        if current.team_id != team_id or current.currency != currency:
            continue
        share = min(invoice_owed(current), left)
        if share <= 0:
            continue
        InvoicePayment.objects.create(
            invoice_id=invoice.pk, team_id=team_id, currency=currency, amount=share,
            source=source, paid_on=today, at=at, reference=reference[:200],
        )  # fmt: skip
        left -= share
    return left


def cash_balances(*, team: Team) -> list[dict[str, Any]]:
    """Per currency: paid in, refunded, applied to invoices, and the balance left."""
    rows: dict[str, dict[str, Any]] = {}

    def row(currency: str) -> dict[str, Any]:
        return rows.setdefault(
            currency,
            {
                "currency": currency,
                "paid": Decimal(0),
                "refunded": Decimal(0),
                "applied": Decimal(0),
            },
        )

    for entry in (
        CashEntry.objects.filter(team=team).values("currency", "kind").annotate(s=Sum("amount"))
    ):
        key = "paid" if entry["kind"] == CashKind.RECEIVED else "refunded"
        row(entry["currency"])[key] += entry["s"]
    for applied in (
        InvoicePayment.objects.filter(team=team).values("currency").annotate(s=Sum("amount"))
    ):
        row(applied["currency"])["applied"] += applied["s"]
    for r in rows.values():
        r["balance"] = r["paid"] - r["refunded"] - r["applied"]
    return sorted(rows.values(), key=lambda r: r["currency"])


@transaction.atomic
def payment_record(
    *,
    acting: Acting,
    team: Team,
    amount: Decimal,
    currency: str,
    reason: str,
    invoice_number: str = "",
) -> CashEntry:
    """Staff record a payment received outside the processor and the bank files (audited:
    the row names them and their reason), applied to the named invoice or the oldest."""
    user = acting.user
    if not user.is_staff:
        raise PaymentNotAuthorised(_("Only staff record payments."))
    with as_invalid():
        amount_check(amount, currency)
    if amount <= 0:
        raise CardInvalid(_("The amount must be positive."), field="amount")
    if not reason.strip():
        raise CardInvalid(_("Give the reason."), field="reason")
    now = db_now()
    entry = CashEntry.objects.create(
        team=team, currency=currency, kind=CashKind.RECEIVED, source=CashSource.MANUAL,
        amount=amount, at=now, reference=reason.strip()[:300], recorded_by=user,
    )  # fmt: skip
    cash_apply(
        team_id=team.pk, currency=currency, amount=amount,
        invoices=unpaid_invoices(team=team, currency=currency, first=invoice_number),
        source=PaymentSource.MANUAL, reference=reason.strip(), at=now,
    )  # fmt: skip
    return entry


def unpaid_invoices(*, team: Team, currency: str, first: str = "") -> list[Invoice]:
    """The team's invoices in `currency` that still ask money, oldest first (`first`, by its
    number, ahead of the others)."""
    invoices: list[Invoice] = [
        i
        for i in with_payment_facts(
            Invoice.objects.filter(team=team, currency=currency, kind=InvoiceKind.INVOICE)
        ).order_by("issued_at", "id")
        if invoice_owed(i) > 0
    ]
    # Named by number: ahead of the rest (an unnumbered one's "" is never named).
    invoices.sort(key=lambda i: not first or i.display_number != first)
    return invoices


# --- Refunds and credits ----------------------------------------------------------------


def credits_returned(*, entry_ids: list[int]) -> list[int]:
    """In the ledger's transaction, after the invoices app issued the credit notes of these
    rows: what a credit note takes off an invoice that was already paid goes back to the
    team's cash (a negative amount applied to the credit note). A card team's is then
    refunded to its card after the commit (`credit_refund`); an invoiced team keeps it as
    credit. Back: the credit notes to refund."""
    notes = list(
        Invoice.objects.filter(ledger_entry_id__in=entry_ids, kind=InvoiceKind.CREDIT_NOTE)
        .select_related("team")
        .order_by("id")
    )
    if not notes:
        return []
    now, today = db_now(), invoice_today()
    refund = []
    # with_payment_facts' rows carry `applied` and `credited` (annotations)
    corrected: dict[int, Any] = {
        i.pk: i
        for i in with_payment_facts(
            Invoice.objects.select_for_update(of=("self",)).filter(
                pk__in=sorted({n.corrects_id for n in notes})
            )
        )
    }
    for note in notes:
        invoice = corrected.get(note.corrects_id) if note.corrects_id is not None else None
        if invoice is None:
            continue
        over = invoice.applied - (invoice.gross + invoice.credited)  # paid beyond what is asked
        back = min(over, -note.gross)
        if back <= 0 or InvoicePayment.objects.filter(invoice=note).exists():
            continue
        InvoicePayment.objects.create(
            invoice=note, team_id=note.team_id, currency=note.currency, amount=-back,
            source=PaymentSource.CREDIT, paid_on=today, at=now, reference=str(invoice),
        )  # fmt: skip
        invoice.applied -= back
        if note.team.billing_mode == BillingMode.CARD:
            refund.append(note.pk)
    return refund


def credit_refund_later(note_ids: list[int]) -> None:
    for pk in note_ids:
        transaction.on_commit(functools.partial(_refund_later, pk))


def _refund_later(note_id: int) -> None:
    current_app.send_task(REFUND_TASK, args=(note_id,))


def credit_refund(*, credit_note_id: int) -> CashEntry | None:
    """Refund a card team's credit note to the card that paid the invoice it corrects: the
    amount moved back to cash, never more than that payment captured less what was refunded
    of it. Once (a unique row per credit note, the processor's idempotency key)."""
    note = Invoice.objects.select_related("corrects").get(pk=credit_note_id)
    corrects = note.corrects
    if corrects is None:  # the database holds every credit note to the invoice it corrects
        return None
    done = CashEntry.objects.filter(credit_note=note, kind=CashKind.REFUNDED).first()
    if done is not None:
        return done
    back = -(
        InvoicePayment.objects.filter(invoice=note, source=PaymentSource.CREDIT).aggregate(
            s=Sum("amount")
        )["s"]
        or Decimal(0)
    )
    quote_id = corrects.ledger_entry.quote_id
    payment = (
        Payment.objects.filter(state=PaymentState.CAPTURED, quote_id=quote_id).first()
        if quote_id is not None  # an entry with no quote was never paid by card
        else None
    )
    if back <= 0 or payment is None:
        return None
    refunded = CashEntry.objects.filter(payment=payment, kind=CashKind.REFUNDED).aggregate(
        s=Sum("amount")
    )["s"] or Decimal(0)
    amount = min(back, payment.amount - refunded)
    if amount <= 0:
        return None
    refund = processor.call(
        processor.client().v1.refunds.create,
        {
            "payment_intent": payment.intent_id,
            "amount": processor.to_minor(amount, payment.currency),
            "metadata": {"credit_note": str(note)},  # "#id" while being numbered
        },
        {"idempotency_key": f"anchorgpu-refund-{note.pk}"},
    )
    try:
        with transaction.atomic():
            return CashEntry.objects.create(
                team_id=note.team_id, currency=note.currency, kind=CashKind.REFUNDED,
                source=CashSource.CARD, amount=amount, at=db_now(), payment=payment,
                credit_note=note, reference=refund.id,
            )  # fmt: skip
    except IntegrityError:
        return CashEntry.objects.get(credit_note=note, kind=CashKind.REFUNDED)
