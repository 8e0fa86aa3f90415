"""Pages: a team's billing (mode, cards, balances), completing 3-D Secure, and staff's
payments page (payments, refunds, failed captures, unmatched transfers, overdue teams)."""

from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _

from accounts.models import Team
from accounts.roles import Action, acting_as, acting_for_request
from core.errors import DomainError
from payments import selectors, services, statements
from payments.models import Payment, PaymentState
from rentals.idempotency import FORM_FIELD


def _processor_context():
    return {
        "stripe_js": settings.PAYMENTS["JS_URL"],
        "stripe_key": settings.PAYMENTS["PUBLISHABLE_KEY"] or "pk_test_unset",
    }


@login_required
def team_billing_page(request, pk):
    team = get_object_or_404(Team, pk=pk, memberships__user=request.user)
    acting = acting_as(request.user, team)
    if request.method == "POST":
        try:
            if request.POST.get("payment_method"):
                card = services.card_save(
                    acting=acting, payment_method=request.POST["payment_method"]
                )
                messages.success(request, _("Card %(card)s saved.") % {"card": str(card)})
            elif request.POST.get("remove"):
                services.card_remove(acting=acting, pk=int(request.POST["remove"]))
                messages.success(request, _("Card removed."))
            elif request.POST.get("default"):
                services.card_default_set(acting=acting, pk=int(request.POST["default"]))
                messages.success(request, _("Default card changed."))
        except (DomainError, ValueError) as exc:
            messages.error(request, getattr(exc, "detail", _("Bad request.")))
        return redirect("team-billing", pk=pk)
    setup, unavailable = None, None
    if request.GET.get("add") and acting.can(Action.MANAGE_CARDS):
        try:
            setup = services.card_setup_intent(acting=acting)
        except DomainError as exc:
            unavailable = exc.detail
    context = {
        "team": team,
        "billing": selectors.team_billing(acting=acting),
        "may_manage": acting.can(Action.MANAGE_CARDS),
        "setup": setup,
        "unavailable": unavailable,
        "nav": "teams",
        **_processor_context(),
    }
    return render(request, "payments/billing.html", context)


@login_required
def payment_authenticate_page(request, pk):
    """Complete a card's 3-D Secure (Stripe.js), then book once with the same key."""
    acting = acting_for_request(request)
    payment = Payment.objects.filter(pk=pk, team__memberships__user=request.user).first()
    if payment is None:
        raise Http404
    booking = payment.quote.kind == "booking"
    context = {
        "payment": payment,
        "waiting": payment.state == PaymentState.REQUIRES_ACTION,
        "book_url": reverse("quote-book", args=[payment.quote_id]) if booking else "",
        "key_field": FORM_FIELD,
        "acting": acting,
        **_processor_context(),
    }
    return render(request, "payments/authenticate.html", context)


@staff_member_required
def staff_payments_page(request):
    if request.method == "POST":
        try:
            if request.FILES.get("statement"):
                upload = request.FILES["statement"]
                result = statements.statement_import(
                    content=upload.read(statements.MAX_BYTES + 1),
                    filename=upload.name,
                    user=request.user,
                )
                messages.success(
                    request,
                    _(
                        "%(imported)s imported: %(matched)s matched, %(unmatched)s unmatched, %(duplicates)s duplicates."
                    )
                    % result,
                )
            elif request.POST.get("transfer"):
                statements.transfer_assign(
                    user=request.user,
                    transfer_id=int(request.POST["transfer"]),
                    invoice_number=request.POST.get("invoice", ""),
                )
                messages.success(request, _("Transfer matched."))
            elif request.POST.get("team"):
                team = get_object_or_404(Team, pk=int(request.POST["team"]))
                services.payment_record(
                    acting=acting_for_request(request), team=team,
                    amount=Decimal(request.POST.get("amount", "")), currency=request.POST.get("currency", ""),
                    reason=request.POST.get("reason", ""), invoice_number=request.POST.get("invoice", ""),
                )  # fmt: skip
                messages.success(request, _("Payment recorded."))
        except (DomainError, ValueError, InvalidOperation) as exc:
            words = getattr(exc, "detail", None) or _("Bad input.")
            messages.error(request, words)
        return redirect("staff-payments")
    context = {
        "overview": selectors.payments_overview(),
        "overdue": selectors.teams_overdue(),
        "nav": "payments",
    }
    return render(request, "payments/staff.html", context)
