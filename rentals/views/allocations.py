"""Allocation pages: the list, the detail with its live parts, and the owner's actions.

Writes go through the same services as the API; refusals are acted on by type.
"""

from datetime import datetime
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from accounts.errors import NotAllowed
from accounts.roles import (
    Acting,
    acting_for_request,
    acting_for_team_of,
)
from core.errors import DomainError, Invalid
from core.pagination import aware_datetime, keyset_page
from rentals import limits, selectors, services
from rentals.access import access_of, key_choices
from rentals.errors import QuoteExpired
from rentals.forms import AllocationFilterForm, ChartRangeForm, ExtendForm, ExtensionQuoteForm
from rentals.idempotency import idempotent
from rentals.models import Allocation, AllocationState, Cluster
from rentals.selectors.allocation_usage import (
    allocation_series,
    allocation_usage,
    stopped_spans,
    time_left,
)
from rentals.selectors.notices import notices_for
from rentals.services.credits import impaired_time_of
from rentals.services.notices import notices_mark_read
from rentals.texts import access_words, notice_subject, notice_text
from rentals.views import key_refused, other_team, requoted

PAGE_SIZE = 50


@login_required
def allocation_list_page(request):
    """The team's allocations by page, what runs first, with what each paid; staff see every team's and filter by owner, GPU model
    and node as well as state. Pages are read by keyset (core.pagination), their place in
    the list counted exactly."""
    form = AllocationFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    listed = selectors.allocation_list(
        acting=acting_for_request(request), state=filters.get("state") or None, filters=filters
    )
    # The list shows neither GPUs nor events (the API's list reads them), nor the team or
    # the period, and the owner to staff only: each join left out is planning time saved.
    shown = ("gpu_model", "node__region", *(("user",) if request.user.is_staff else ()))
    allocations = selectors.allocations_as_listed(
        listed.prefetch_related(None).select_related(None).select_related(*shown)
    )
    page = keyset_page(
        request.GET, allocations, selectors.ALLOCATION_ORDER,
        parsers=(int, aware_datetime, aware_datetime, UUID), key_of=selectors.allocation_key,
        size=PAGE_SIZE, narrow=selectors.allocations_ranked(listed),
    )  # fmt: skip
    total, before = selectors.allocations_counted(listed, before=page.count_before)
    page.place(before=before, total=total)
    state_query = QueryDict(page.query, mutable=True)
    state_query.pop("state", None)
    return render(
        request,
        "rentals/allocation_list.html",
        {
            "allocations": page.rows,
            "page": page,
            "query": page.query,
            "state_query": state_query.urlencode(),
            "cursor_error": None if page.valid else _("This page link is not valid."),
            "form": form,
            "state": filters.get("state") or None,
            "states": AllocationState.choices,
            "now": timezone.now(),
            "nav": "allocations",
        },
        status=200 if page.valid else 400,
    )


def _readable(request, pk) -> tuple[Allocation, Acting]:
    """The allocation and whom it is read as: the team acted for, or, for a member of its
    team, that team (the page then offers to act for it)."""
    acting = acting_for_request(request)
    allocation = selectors.allocation_get(acting=acting, pk=pk)
    if allocation is None:
        acting = acting_for_team_of(request, selectors.team_of_rental(Allocation, pk=pk))
        allocation = selectors.allocation_get(acting=acting, pk=pk)
    if allocation is None:
        raise Http404
    return allocation, acting


def paid_timeline(*, allocation: Allocation, now: datetime) -> dict:
    """The paid period as a bar: where now is and the stopped spans, in % of its width.
    Before the start there is no "now" on it: it says when the period starts instead."""
    start, end = allocation.paid_from, allocation.paid_until
    total = (end - start).total_seconds()

    def pct(at):
        return max(0.0, min(100.0, (at - start).total_seconds() / total * 100))

    left = time_left(allocation=allocation, now=now)
    return {
        "started": now >= start,
        "starts_in_hours": round(max((start - now).total_seconds(), 0) / 3600, 1),
        "now_pct": pct(now),
        "stopped": [
            {"left": pct(a), "width": max(pct(b) - pct(a), 0.4), "from": a, "to": b}
            for a, b in stopped_spans(allocation=allocation, now=now)
        ],
        "time_left": left,
        "hours_left": round(left.total_seconds() / 3600, 1),
    }


def access_shown(allocation) -> dict:
    """The allocation's access with its state in words, for the pages."""
    access = access_of([allocation])[allocation.pk]
    label, explanation = access_words(access["state"])
    if access["state"] == "revoked" and not allocation.is_live:
        explanation = _("The allocation has ended; its login and home on the node are gone.")
    return {**access, "label": label, "explanation": explanation}


def _detail_context(request, allocation, acting, **extra):
    now = timezone.now()
    chart_range = ChartRangeForm(request.GET or None)
    switch_to = other_team(request, acting)
    is_owner = switch_to is None and selectors.may_act_on(acting=acting, allocation=allocation)
    return {
        "chart_range": chart_range,
        "chart_query": request.GET.urlencode() if chart_range.is_valid() else "",
        "allocation": allocation,
        "now": now,
        "timeline": paid_timeline(allocation=allocation, now=now),
        "summary": allocation_usage(allocation=allocation, now=now),
        "is_owner": is_owner,
        "access": access_shown(allocation),
        "key_choices": key_choices(acting=acting, allocation=allocation)
        if is_owner and allocation.is_live
        else [],
        "extend_range": range(1, limits.period_count_max() + 1),
        "impaired_time": impaired_time_of(allocation),
        "neighbours": selectors.node_neighbours(allocation=allocation, at=now)
        if allocation.is_live
        else None,
        "switch_to": switch_to,
        "nav": "allocations",
        **extra,
    }


@login_required
def allocation_detail_page(request, pk):
    allocation, acting = _readable(request, pk)
    context = _detail_context(request, allocation, acting)
    return render(request, "rentals/allocation_detail.html", context)


@login_required
def allocation_live_part(request, pk):
    """The parts of the detail page that htmx refreshes: state, timeline, summary."""
    allocation, acting = _readable(request, pk)
    context = _detail_context(request, allocation, acting)
    return render(request, "rentals/_allocation_live.html", context)


@login_required
def allocation_telemetry_json(request, pk):
    allocation, _acting = _readable(request, pk)
    chart_range = ChartRangeForm(request.GET or None)
    if request.GET and not chart_range.is_valid():
        return JsonResponse({"errors": chart_range.errors}, status=400)
    start, end = chart_range.window(allocation=allocation, now=timezone.now())
    return JsonResponse(allocation_series(allocation=allocation, start=start, end=end))


def _owned(request, pk):
    """The allocation, or None after saying why it may not be changed: it is another of the
    person's teams' (act for it first), staff read but change nothing, or the role may not."""
    acting = acting_for_request(request)
    try:
        allocation = selectors.allocation_for_action(acting=acting, pk=pk)
    except NotAllowed as exc:
        messages.error(request, exc.detail)
        return None
    if allocation is None:
        other = acting_for_team_of(request, selectors.team_of_rental(Allocation, pk=pk))
        if other is acting:
            raise Http404
        messages.error(request, _not_acted_for(other.team))
        return None
    return allocation


def _not_acted_for(team) -> str:
    return _("This belongs to %(team)s: act for %(team)s to change it.") % {"team": team.name}


ACTIONS = {
    "stop": (services.allocation_stop, gettext_lazy("Stopped. The paid period keeps running.")),
    "start": (services.allocation_start, gettext_lazy("Started.")),
    "cancel": (services.allocation_cancel, gettext_lazy("Cancelled and refunded in full.")),
}


@login_required
@require_POST
def allocation_action(request, pk, action):
    if action not in ACTIONS:
        raise Http404
    allocation = _owned(request, pk)
    if allocation is not None:
        service, done = ACTIONS[action]
        _act(request, lambda acting: service(acting=acting, allocation=allocation), done)
    return redirect("allocation-detail", pk=pk)


def _act(request, act, done) -> None:
    """Run a page's action as the acting person; its refusal, or `done`, as a message."""
    try:
        act(acting_for_request(request))
    except DomainError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, done)


@login_required
@require_POST
def allocation_keys_page(request, pk):
    """The keys a live allocation lets in, chosen on its page."""
    allocation = _owned(request, pk)
    if allocation is not None:
        chosen = [int(k) for k in request.POST.getlist("ssh_keys") if str(k).isdecimal()]
        try:
            services.allocation_keys_set(
                acting=acting_for_request(request), allocation=allocation, ssh_key_ids=chosen
            )
        except DomainError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, _("Keys saved; the node takes them at its next look."))
    return redirect("allocation-detail", pk=pk)


@login_required
@require_POST
@idempotent(
    refused=key_refused(
        back="allocation-detail",
        in_flight=gettext_lazy("Your extension is being processed."),
    ),
    purchase=lambda data, kwargs: data.get("quote") or None,
)
def allocation_extend_page(request, pk):
    """Extend from the detail page; the form's own key makes a resubmit extend once."""
    allocation = _owned(request, pk)
    if allocation is None:
        return redirect("allocation-detail", pk=pk)
    form = ExtendForm(request.POST)
    acting = acting_for_request(request)
    quote = None
    try:
        if not form.is_valid():
            raise Invalid([m for errors in form.errors.values() for m in errors])
        if form.cleaned_data["quote"]:
            quote = selectors.quote_get(acting=acting, pk=form.cleaned_data["quote"])
            if quote is None:
                raise Http404
        services.allocation_extend(
            acting=acting,
            allocation=allocation,
            quote=quote,
            period_count=form.cleaned_data["period_count"],
            payment=getattr(request, "purchase_payment", None),
        )
    except QuoteExpired:
        return _extension_requote(request, allocation, quote)
    except DomainError as exc:
        context = _detail_context(request, allocation, acting, refusal=" ".join(exc.messages))
        return render(request, "rentals/allocation_detail.html", context, status=exc.status)
    messages.success(request, _("Extended. The new end of the paid period is shown below."))
    return redirect("allocation-detail", pk=pk)


@login_required
@require_POST
def extension_quote_page(request, pk):
    """Price an extension first: the customer reads its lines and total, then confirms."""
    allocation = _owned(request, pk)
    if allocation is None:
        return redirect("allocation-detail", pk=pk)
    form = ExtensionQuoteForm(request.POST)
    try:
        if not form.is_valid():
            raise Invalid([m for errors in form.errors.values() for m in errors])
        quote = services.extension_quote_create(
            acting=acting_for_request(request),
            allocation=allocation,
            period_count=form.cleaned_data["period_count"],
        )
    except DomainError as exc:
        messages.error(request, exc.messages[0])
        return redirect("allocation-detail", pk=pk)
    return redirect("quote", pk=quote.pk)


def _extension_requote(request, allocation, quote):
    """An expired extension quote: price the same periods again and show the new total."""
    try:
        fresh = services.extension_quote_create(
            acting=acting_for_request(request),
            allocation=allocation,
            period_count=quote.period_count,
        )
    except DomainError as exc:
        messages.error(request, exc.messages[0])
        return redirect("allocation-detail", pk=allocation.pk)
    return requoted(request, expired=quote, fresh=fresh)


@login_required
def notices_page(request):
    """The person's notices, newest first, in their language; opening the page reads them."""
    notices = list(notices_for(user=request.user))
    for notice in notices:
        notice.subject, notice.text = notice_subject(notice), notice_text(notice)
    notices_mark_read(user=request.user)
    return render(request, "rentals/notices.html", {"notices": notices, "nav": "notices"})


def _cluster_readable(request, pk):
    """The cluster, its allocations, and whom they are read as (as `_readable`)."""
    acting = acting_for_request(request)
    cluster, members = selectors.cluster_get(acting=acting, pk=pk)
    if cluster is None:
        acting = acting_for_team_of(request, selectors.team_of_rental(Cluster, pk=pk))
        cluster, members = selectors.cluster_get(acting=acting, pk=pk)
    if cluster is None:
        raise Http404
    return cluster, members, acting


@login_required
def cluster_detail_page(request, pk):
    """A cluster as one rental: its shared period, fabric and state, and its nodes."""
    cluster, members, acting = _cluster_readable(request, pk)
    switch_to = other_team(request, acting)
    summary = selectors.cluster_summary(cluster, members)
    states = {m.state for m in members}
    access = access_of(members)
    for member in members:
        member.access = {**access[member.pk], "label": access_words(access[member.pk]["state"])[0]}
    return render(
        request,
        "rentals/cluster_detail.html",
        {
            "cluster": cluster,
            "members": members,
            "summary": summary,
            "is_owner": switch_to is None
            and selectors.may_act_on(acting=acting, allocation=members[0]),
            "switch_to": switch_to,
            "live": any(m.is_live for m in members) and summary["paid_until"] > timezone.now(),
            "any_running": AllocationState.RUNNING in states,
            "any_stopped": AllocationState.STOPPED in states,
            "extend_range": range(1, limits.period_count_max() + 1),
            "nav": "allocations",
        },
    )


CLUSTER_ACTIONS = {
    "stop": (
        services.cluster_stop,
        gettext_lazy("Every running node is stopped. The paid period keeps running."),
    ),
    "start": (
        services.cluster_start,
        gettext_lazy("Every stopped node is started."),
    ),
    "cancel": (
        services.cluster_cancel,
        gettext_lazy("The whole cluster is cancelled and refunded in full."),
    ),
}


@login_required
@require_POST
def cluster_action(request, pk, action):
    if action not in CLUSTER_ACTIONS:
        raise Http404
    cluster, members, acting = _cluster_readable(request, pk)
    if acting is not acting_for_request(request):  # another of the person's teams
        messages.error(request, _not_acted_for(acting.team))
        return redirect("cluster-detail", pk=pk)
    try:
        selectors.allocation_act_check(acting=acting, allocation=members[0])
    except NotAllowed as exc:
        messages.error(request, exc.detail)
        return redirect("cluster-detail", pk=pk)
    service, done = CLUSTER_ACTIONS[action]
    _act(request, lambda acting: service(acting=acting, cluster=cluster), done)
    return redirect("cluster-detail", pk=pk)
