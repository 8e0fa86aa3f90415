"""The payments app's refusals (DomainError: problem details in the API, words on pages)."""

from django.utils.translation import gettext_lazy as _

from core.errors import Conflict, DomainError


class PaymentRefused(DomainError):
    """A purchase's payment was refused; `final`: the Idempotency-Key's stored answer."""

    status = 402
    final = True


class PaymentDeclined(PaymentRefused):
    code = "payment_declined"
    title = _("The card was declined")


class PaymentRequiresAction(PaymentRefused):
    """3-D Secure: not final. The same request with the same key books once it is done."""

    code = "payment_requires_action"
    title = _("The card needs 3-D Secure")
    final = False


class CardMissing(PaymentRefused):
    code = "card_required"
    title = _("A card is needed")
    final = False  # save a card, then retry with the same key


class PaymentNotAuthorised(PaymentRefused):
    code = "payment_required"
    title = _("The purchase was not paid")


class CreditLimitExceeded(PaymentRefused):
    code = "credit_limit_exceeded"
    title = _("Over the team's credit limit")


class InvoiceOverdue(PaymentRefused):
    code = "invoice_overdue"
    title = _("An invoice is overdue")


class ProcessorUnavailable(DomainError):
    """The processor did not answer: nothing was charged or booked; retry soon."""

    status = 503
    code = "payment_processor_unavailable"
    title = _("The payment processor is unavailable")
    retry_after = 30


class CardUnknown(DomainError):
    status = 404
    code = "card_not_found"
    title = _("No such card")


class CardInvalid(DomainError):
    code = "payment_method_invalid"
    title = _("The card could not be saved")


class StatementInvalid(DomainError):
    code = "statement_invalid"
    title = _("The statement could not be read")


class WebhookForged(DomainError):
    code = "signature_invalid"
    title = _("The event's signature does not verify")


class PaymentConflict(Conflict):
    code = "payment_conflict"
