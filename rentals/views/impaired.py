"""The staff page of impaired allocations (/impaired/) and its remedies: replace the GPUs,
read a credit note and issue it. The same services as the API and the admin."""

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.roles import Operation, operator_can
from core.errors import DomainError
from core.money import money_text
from rentals import selectors
from rentals.services.credits import credit_note_build, credit_note_issue
from rentals.services.impairments import allocation_replace


@staff_member_required
def impaired_page(request):
    found = selectors.impaired_allocations()
    for allocation in found:
        try:
            allocation.credit_note = credit_note_build(allocation=allocation)
            allocation.credit_refusal = ""
        except DomainError as exc:
            allocation.credit_note, allocation.credit_refusal = None, exc.detail
    context = {
        "nav": "impaired", "allocations": found,
        "may_replace": operator_can(request.user, Operation.REPLACE),
        "may_credit": operator_can(request.user, Operation.CREDIT),
    }  # fmt: skip
    return render(request, "rentals/impaired.html", context)


@staff_member_required
@require_POST
def impaired_replace(request, pk):
    try:
        allocation_replace(operator=request.user, allocation_id=pk)
    except DomainError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, _("Replaced: the allocation holds working GPUs again."))
    return redirect("impaired")


@staff_member_required
@require_POST
def impaired_credit(request, pk):
    try:
        note = credit_note_issue(operator=request.user, allocation_id=pk)
    except DomainError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(
            request,
            _("Credit issued: %(total)s.") % {"total": money_text(note.total, note.currency)},
        )
    return redirect("impaired")
