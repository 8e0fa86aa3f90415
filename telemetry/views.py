"""The flags page for staff: what to look at now, acknowledging with a note, the history."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core.decorators import staff_required
from core.errors import DomainError
from telemetry.models import Flag
from telemetry.selectors import flag_list
from telemetry.services import flag_acknowledge

HISTORY_PAGE = 50
OPEN_PAGE = 100


@staff_required
def flags_page(request):
    """Open flags and the history, each paged on its own (`open` and `page`), each with its
    true count: a large fleet has thousands open at once."""
    history = Paginator(flag_list(state="closed"), HISTORY_PAGE).get_page(request.GET.get("page"))
    open_flags = Paginator(flag_list(state="open"), OPEN_PAGE).get_page(request.GET.get("open"))
    return render(
        request,
        "telemetry/flags.html",
        {"open_flags": open_flags, "page": history, "nav": "flags"},
    )


@staff_required
@require_POST
def flag_acknowledge_page(request, pk):
    flag = get_object_or_404(Flag, pk=pk)
    try:
        flag_acknowledge(flag=flag, user=request.user, note=request.POST.get("note", ""))
    except DomainError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, _("Acknowledged."))
    return redirect("flags")
