"""Allocation, statement and usage pages. Writes go through the same services as the API."""

import uuid

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from anchorgpu.errors import DomainError
from rentals import selectors, services, usage
from rentals.exports import statement_csv_response
from rentals.models import AllocationState


@login_required
def allocation_list_page(request):
    state = request.GET.get("state") or None
    if state not in (None, *AllocationState.values):
        state = None
    allocations = selectors.allocation_list_for_user(user=request.user, state=state)[:200]
    return render(
        request,
        "rentals/allocation_list.html",
        {
            "allocations": allocations,
            "state": state,
            "states": AllocationState.choices,
            "now": timezone.now(),
            "nav": "allocations",
        },
    )


def _allocation_or_404(request, pk):
    allocation = selectors.allocation_get_for_user(user=request.user, pk=pk)
    if allocation is None:
        raise Http404
    return allocation


def _detail_context(request, allocation):
    now = timezone.now()
    return {
        "allocation": allocation,
        "now": now,
        "timeline": usage.paid_timeline(allocation=allocation, now=now),
        "summary": usage.allocation_usage(allocation=allocation, now=now),
        "is_owner": allocation.user_id == request.user.pk,
        "extend_range": range(1, 13),
        "extend_key": uuid.uuid4(),
    }


@login_required
def allocation_detail_page(request, pk):
    allocation = _allocation_or_404(request, pk)
    context = _detail_context(request, allocation)
    context["nav"] = "allocations"
    return render(request, "rentals/allocation_detail.html", context)


@login_required
def allocation_live_part(request, pk):
    """The parts of the detail page that htmx refreshes: state, timeline, summary."""
    allocation = _allocation_or_404(request, pk)
    return render(request, "rentals/_allocation_live.html", _detail_context(request, allocation))


@login_required
def allocation_telemetry_json(request, pk):
    allocation = _allocation_or_404(request, pk)
    return JsonResponse(usage.allocation_series(allocation=allocation))


ACTIONS = {
    "stop": services.allocation_stop,
    "start": services.allocation_start,
    "cancel": services.allocation_cancel,
}


@login_required
@require_POST
def allocation_action(request, pk, action):
    allocation = _allocation_or_404(request, pk)
    if allocation.user_id != request.user.pk:
        messages.error(request, _("Staff can read every allocation but change none."))
        return redirect("allocation-detail", pk=pk)
    try:
        if action == "extend":
            key = services.idempotency_key_parse(request.POST.get("idempotency_key"))
            count = int(request.POST.get("period_count") or 0)

            def extend():
                services.allocation_extend(
                    allocation=allocation, actor=request.user, period_count=count
                )
                return 200, {"extended_by": count}

            services.idempotent_call(
                user=request.user,
                key=key,
                fingerprint=services.request_fingerprint(
                    method="POST", path=request.path, data={"period_count": count}
                ),
                handler=extend,
            )
            messages.success(request, _("Extended. The new end of the paid period is shown below."))
        elif action in ACTIONS:
            ACTIONS[action](allocation=allocation, actor=request.user)
            messages.success(
                request,
                {
                    "stop": _("Stopped. The paid period keeps running."),
                    "start": _("Started."),
                    "cancel": _("Cancelled and refunded in full."),
                }[action],
            )
        else:
            raise Http404
    except (DomainError, ValueError) as exc:
        messages.error(request, getattr(exc, "detail", _("Enter a whole number of periods.")))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("allocation-detail", pk=pk)


@login_required
def statement_page(request):
    entries = selectors.ledger_for_user(user=request.user)[:500]
    return render(
        request,
        "rentals/statement.html",
        {
            "entries": entries,
            "balance": selectors.ledger_balance(user=request.user),
            "nav": "statement",
        },
    )


@login_required
def statement_csv(request):
    return statement_csv_response(user=request.user)


@staff_member_required
def usage_page(request):
    days = request.GET.get("days", "7")
    days = int(days) if days.isdigit() and 1 <= int(days) <= 90 else 7
    context = usage.fleet_dashboard(days=days)
    if table := request.GET.get("csv"):
        return usage.dashboard_csv(context, table)
    context.update({"days": days, "nav": "usage"})
    return render(request, "rentals/usage.html", context)
