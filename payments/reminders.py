"""Reminders of invoiced teams' unpaid invoices: PAYMENTS["REMIND_BEFORE_DAYS"] before the
due date and once it has passed, by e-mail in each reader's language, to the team's owners
and billing members. Once per invoice, kind and person (`PaymentReminder`)."""

from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from accounts.models import BillingMode, Membership, Role
from core.db import db_now
from core.money import money_text
from invoices.models import Invoice, InvoiceKind
from invoices.selectors import invoice_owed, invoice_today, with_payment_facts
from payments.models import PaymentReminder, ReminderKind
from rentals.texts import reader_preferences


def payment_reminders_send() -> int:
    """Send what is due; back: how many e-mails went out."""
    today = invoice_today()
    soon = today + timedelta(days=settings.PAYMENTS["REMIND_BEFORE_DAYS"])
    invoices = with_payment_facts(
        Invoice.objects.filter(
            kind=InvoiceKind.INVOICE, team__billing_mode=BillingMode.INVOICED, due_on__lte=soon
        ).select_related("team")
    )
    sent = 0
    for invoice in invoices:
        owed = invoice_owed(invoice)
        if owed <= 0 or invoice.due_on is None:  # found by due_on__lte: never None
            continue
        kind = ReminderKind.OVERDUE if invoice.due_on < today else ReminderKind.DUE_SOON
        readers = Membership.objects.filter(
            team=invoice.team_id, role__in=[Role.OWNER, Role.BILLING]
        ).select_related("user")
        for membership in readers:
            sent += _remind(invoice, owed, kind, membership.user)
    return sent


def _remind(invoice, owed, kind, user) -> int:
    try:
        with transaction.atomic():
            PaymentReminder.objects.create(invoice=invoice, user=user, kind=kind, sent_at=db_now())
            with reader_preferences(user):
                amount = money_text(owed, invoice.currency)
                facts = {
                    "number": invoice.display_number,
                    "amount": amount,
                    "due": invoice.due_on.isoformat(),
                }
                if kind == ReminderKind.OVERDUE:
                    subject = _("Invoice %(number)s is overdue") % facts
                    body = (
                        _(
                            "Invoice %(number)s was due on %(due)s and %(amount)s is still unpaid. "
                            "New bookings and extensions wait until it is paid; running rentals "
                            "continue."
                        )
                        % facts
                    )
                else:
                    subject = _("Invoice %(number)s is due on %(due)s") % facts
                    body = _("%(amount)s of invoice %(number)s is due on %(due)s.") % facts
            send_mail(subject=subject, message=body, from_email=None, recipient_list=[user.email])
    except IntegrityError:
        return 0  # reminded already
    return 1
