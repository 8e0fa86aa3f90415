"""Booking pages: the catalog with what is free now, the booking form, the quote and booking
from it.

Writes go through the same services as the API; refusals are acted on by type."""

import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.forms import ModelChoiceField
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from accounts.roles import acting_for_request, acting_for_team_of
from accounts.services.ssh_keys import ssh_keys_of
from catalog.models import GpuModel, Region, RentalPeriod
from catalog.selectors import gpu_price_history
from catalog.software import NO_REQUIRES, REQUIRES, Requires, requires_errors
from core.dates import when_text
from core.db import db_now
from core.errors import DomainError, Invalid, form_errors_add
from rentals import limits, selectors, services
from rentals.errors import NoCapacity, QuoteExpired, QuoteUsed
from rentals.forms import GpuModelFilterForm, QuoteForm
from rentals.idempotency import idempotent
from rentals.models import Quote, QuoteKind
from rentals.selectors.availability import (
    CalendarDay,
    availability_calendar,
    cluster_shape,
    gpu_model_offers,
    max_gpus_per_node,
    start_windows,
)
from rentals.views import key_refused, other_team, requoted

SPEC_TERMS = {"vram": "vram", "cuda": "cuda", "rocm": "rocm", "fp8": "quantization"}


def catalog_page(request):
    filters = GpuModelFilterForm({k: v for k, v in request.GET.items() if v})
    valid = filters.is_valid()
    models = list(gpu_model_offers(filters=filters.cleaned_data if valid else {}))
    return render(
        request,
        "rentals/catalog.html",
        {
            "models": models,
            "filter_errors": None if valid else filters.errors,
            "query": request.GET,
            "nav": "catalog",
        },
    )


def _ceil_minute(at):
    """The form takes minutes; rounding down would offer a start that does not fit."""
    if at is None or (at.second == 0 and at.microsecond == 0):
        return at
    return at.replace(second=0, microsecond=0) + timedelta(minutes=1)


@login_required
def book_page(request, slug):
    gpu_model = get_object_or_404(GpuModel, slug=slug, is_active=True)
    earliest = None
    if request.method == "POST":
        form = QuoteForm(request.POST, gpu_model=gpu_model)
        if form.is_valid():
            try:
                quote = services.quote_create(
                    acting=acting_for_request(request),
                    gpu_model=gpu_model.slug,
                    **form.quote_input(),
                )
            except Invalid as exc:
                form_errors_add(form, exc)
            except NoCapacity as exc:
                form.add_error(None, exc.detail)
                earliest = _ceil_minute(exc.earliest_start)
            except DomainError as exc:
                form.add_error(None, exc.detail)
            else:
                return redirect("quote", pk=quote.pk)
    else:
        form = QuoteForm(gpu_model=gpu_model, initial=request.GET.dict() or None)
    # The estimate reads the input afresh: a refusal added to the form (no capacity) is no
    # input error, and an unbound form is estimated as it is shown.
    priced = (
        QuoteForm(request.POST, gpu_model=gpu_model, like=form)
        if form.is_bound
        else _bound_copy(form)
    )
    return render(
        request,
        "rentals/book.html",
        {
            "gpu_model": gpu_model,
            "form": form,
            "earliest": earliest,
            **_availability_context(request, gpu_model, form),
            **_estimate_context(
                gpu_model,
                priced,
                team=acting_for_request(request).team,
                errors_beside_fields=form.is_bound,
            ),  # fmt: skip
            "price_history": gpu_price_history(gpu_model=gpu_model),
            "nav": "catalog",
        },
    )


@login_required
@require_POST
def book_estimate_part(request, slug):
    """The booking form's running total, fetched by htmx as the form changes: priced by the
    quote's own code, stored nowhere. Bad input answers its field errors, never a 500."""
    gpu_model = get_object_or_404(GpuModel, slug=slug, is_active=True)
    form = QuoteForm(request.POST, gpu_model=gpu_model)
    team = acting_for_request(request).team
    return render(request, "rentals/_estimate.html", _estimate_context(gpu_model, form, team=team))


def _bound_copy(form: QuoteForm) -> QuoteForm:
    """The unbound form's initial choices as input (the first period where none is given),
    so the page opens with the estimate of what it shows."""
    data = {}
    for field in form:
        value = field.value()
        if value not in (None, "", False):
            data[field.html_name] = "1" if value is True else value
    periods = form.fields["period"]
    assert isinstance(periods, ModelChoiceField) and periods.queryset is not None  # QuoteForm's
    if "period" not in data and (first := periods.queryset.first()):
        data["period"] = first.slug
    return QuoteForm(data, gpu_model=form.gpu_model, like=form)


def _estimate_context(gpu_model, form: QuoteForm, *, team, errors_beside_fields=False) -> dict:
    """`estimate` (an unsaved quote from services.quote_estimate) and, when its window is not
    free now, `estimate_refusal` with the earliest start that fits; or `estimate_errors`,
    (label, message) for each field that does not price (unless the page shows them beside
    the fields already)."""
    context = {
        "gpu_model": gpu_model, "estimate": None, "estimate_errors": [],
        "errors_beside_fields": errors_beside_fields,
    }  # fmt: skip
    if form.is_valid():
        try:
            context["estimate"] = services.quote_estimate(
                gpu_model=gpu_model.slug, team=team, **form.quote_input()
            )
        except Invalid as exc:
            form_errors_add(form, exc)
        except DomainError as exc:
            form.add_error(None, exc.detail)
    if context["estimate"] is None:
        context["estimate_errors"] = [
            (form.fields[name].label if name in form.fields else None, message)
            for name, messages_ in form.errors.items()
            for message in messages_
        ]
        return context
    refusal = services.quote_capacity_refusal(quote=context["estimate"])
    context["estimate_refusal"] = refusal
    context["estimate_earliest"] = _ceil_minute(refusal.earliest_start) if refusal else None
    context["quote_minutes"] = int(settings.ANCHORGPU["QUOTE_VALIDITY"].total_seconds() // 60)
    return context


def _quote_readable(request, pk):
    """The quote and whom it is read as: the team acted for (a form's own team included),
    or, for a member of the quote's team, that team (the page offers to act for it)."""
    acting = acting_for_request(request)
    quote = selectors.quote_get(acting=acting, pk=pk)
    if quote is None:
        acting = acting_for_team_of(request, selectors.team_of_rental(Quote, pk=pk))
        quote = selectors.quote_get(acting=acting, pk=pk)
    if quote is None:
        raise Http404
    return quote, acting


def _quote_context(request, quote, acting, **extra) -> dict:
    """The quote page: its lines, what became of it (booked, extended, expired), and the
    team to switch to where it is another of the person's teams'."""
    return {
        "quote": quote, "idempotency_key": uuid.uuid4(), "nav": "catalog",
        "ssh_keys": ssh_keys_of(user=request.user),
        "outcome": selectors.quote_outcome(quote=quote, now=timezone.now()),
        "switch_to": other_team(request, acting), **extra,
    }  # fmt: skip


@login_required
def quote_page(request, pk):
    quote, acting = _quote_readable(request, pk)
    return render(request, "rentals/quote.html", _quote_context(request, quote, acting))


@login_required
@require_POST
def quote_requote(request, pk):
    """An expired quote, priced again with the same choices for its own team (the form's)."""
    quote, acting = _quote_readable(request, pk)
    if acting is not acting_for_request(request):
        messages.error(
            request,
            _("This quote belongs to %(team)s: act for %(team)s to quote it again.")
            % {"team": acting.team.name},
        )
        return redirect("quote", pk=pk)
    if quote.kind == QuoteKind.EXTENSION:
        return redirect("allocation-detail", pk=quote.extends_id)
    return _requote(request, quote)


@login_required
@require_POST
@idempotent(
    refused=key_refused(
        back="quote",
        in_flight_to="allocation-list",
        in_flight=gettext_lazy("Your booking is being processed."),
    ),
    purchase=lambda data, kwargs: kwargs.get("pk"),
)
def quote_book(request, pk):
    """Book from the quote page, for the team the page's form was made for. The form's own
    key makes a double submit book once."""
    quote, acting = _quote_readable(request, pk)
    if acting is not acting_for_request(request):
        messages.error(
            request,
            _("This quote belongs to %(team)s: act for %(team)s to book it.")
            % {"team": acting.team.name},
        )
        return redirect("quote", pk=pk)
    chosen = None  # a form without the key choice (an old page) lets in all of the booker's
    if request.POST.get("keys_chosen"):
        chosen = [int(k) for k in request.POST.getlist("ssh_keys") if str(k).isdecimal()]
    try:
        allocation = services.allocation_book(
            acting=acting_for_request(request), quote=quote, ssh_keys=chosen,
            payment=getattr(request, "purchase_payment", None),
        )  # fmt: skip
    except QuoteExpired:
        return _requote(request, quote)
    except NoCapacity as exc:
        if exc.earliest_start is None:
            messages.error(request, exc.detail)
            return redirect(_requote_url(quote))
        messages.error(
            request,
            _("%(refusal)s Book from %(at)s instead: the same choices are filled in below.")
            % {"refusal": exc.detail, "at": when_text(exc.earliest_start)},
        )
        return redirect(_requote_url(quote, starts_at=exc.earliest_start))
    except QuoteUsed as exc:
        messages.error(request, exc.detail)
        return redirect(_requote_url(quote))
    except DomainError as exc:
        return _refused(request, quote, " ".join(exc.messages), exc.status)
    messages.success(request, _("Booked. Your GPUs are reserved for the paid period."))
    if allocation.cluster_id:
        return redirect("cluster-detail", pk=allocation.cluster_id)
    return redirect("allocation-detail", pk=allocation.pk)


def _refused(request, quote, words, status):
    context = _quote_context(request, quote, acting_for_request(request), refusal=words)
    return render(request, "rentals/quote.html", context, status=status)


def _requote(request, quote):
    """An expired quote: price the same request again and show the new total to confirm."""
    starts_at = None if quote.starts_now or quote.paid_from <= db_now() else quote.paid_from
    try:
        fresh = services.quote_create(
            acting=acting_for_request(request),
            gpu_model=quote.gpu_model.slug,
            **(
                {"node_count": quote.node_count}
                if quote.node_count
                else {"gpu_count": quote.gpu_count}
            ),
            period=quote.period.slug,
            period_count=quote.period_count,
            starts_at=starts_at,
            options=[
                {"option": line.option.slug, "quantity": line.count}
                | ({"input": line.note} if line.note else {})
                for line in quote.lines.all()
                if line.option_id
            ],
            region=quote.region.slug if quote.region_id else None,
        )
    except DomainError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(_requote_url(quote))
    return requoted(request, expired=quote, fresh=fresh)


@dataclass(frozen=True)
class _Choice:
    """What the booking form asks availability for: as entered, or the defaults."""

    shape: str  # "gpus" on one node, or whole "nodes" of one network group
    gpu_count: int
    node_count: int
    period: RentalPeriod | None
    period_count: int
    region: Region | None
    regions: list[Region]
    periods: list[RentalPeriod]
    requires: Requires = NO_REQUIRES


def _availability_context(request, gpu_model, form) -> dict:
    """The calendar and the earliest start for the choices on the form (as entered, or the
    defaults), before any quote; `region` narrows both."""
    per_cluster_node, largest_group = cluster_shape(gpu_model=gpu_model)
    choice = _availability_choice(request, form, gpu_model, clusters=bool(largest_group))
    region_id = choice.region.pk if choice.region else None
    now = db_now()
    per_node = max_gpus_per_node(gpu_model=gpu_model)
    calendar = availability_calendar(
        gpu_model=gpu_model, start=now, per_node=per_node, whole_nodes=choice.shape == "nodes",
        region=choice.region, requires=choice.requires,
    )  # fmt: skip
    fits_shape = (
        choice.node_count <= largest_group
        if choice.shape == "nodes"
        else choice.gpu_count <= per_node
    )
    windows = []
    if choice.period and fits_shape:
        windows = start_windows(
            gpu_model=gpu_model, duration=choice.period.duration * choice.period_count,
            not_before=now, gpu_count=choice.gpu_count,
            node_count=choice.node_count if choice.shape == "nodes" else None,
            region_id=region_id, limit=3, requires=choice.requires, kept=True,
        )  # fmt: skip
    return {
        "calendar_weeks": [[_calendar_cell(day) for day in week] for week in calendar.weeks],
        "calendar_per_node": calendar.per_node,
        "calendar_nodes": calendar.nodes,
        "calendar_scale": [asdict(step) for step in calendar.scale],
        "calendar_as_of": calendar.as_of,
        "windows": windows,
        "start_then": _start_then_url(gpu_model, choice, windows, now),
        "availability_for": {
            "shape": choice.shape,
            "gpu_count": choice.gpu_count,
            "node_count": choice.node_count,
            "period": choice.period,
            "period_count": choice.period_count,
        },
        "cluster": {
            "gpus_per_node": per_cluster_node,
            "largest_group": largest_group,
            "fabrics": sorted(
                gpu_model.nodes.exclude(network_group="")
                .order_by()
                .values_list("fabric", flat=True)
                .distinct()
            ),
        },
        "regions": choice.regions,
        "periods": choice.periods,
        "region": choice.region,
        "requires": choice.requires,
    }


def _calendar_cell(day: CalendarDay) -> dict:
    """A day of the calendar as its cell shows it: its fields (read flat, not copied deep as
    `asdict` does), its tooltip, and its date as the cell writes it ("31.12"), each made
    once here rather than by a filter in each of the calendar's cells."""
    return {
        "date": day.date, "max_gpus_on_one_node": day.max_gpus_on_one_node,
        "free_whole_nodes": day.free_whole_nodes, "free_gpus": day.free_gpus,
        "free": day.free, "shade": day.shade, "title": _calendar_title(day),
        "label": day.date.strftime("%d.%m"),
    }  # fmt: skip


def _calendar_title(day: CalendarDay) -> str:
    """A day's tooltip, written here once per day rather than by two template tags."""
    nodes, gpus = day.free_whole_nodes, day.free_gpus
    return ", ".join(
        (
            ngettext("%(n)s whole node free", "%(n)s whole nodes free", nodes) % {"n": nodes},
            ngettext("%(n)s GPU free in all", "%(n)s GPUs free in all", gpus) % {"n": gpus},
        )
    )


def _availability_choice(request, form, gpu_model, *, clusters: bool) -> _Choice:
    """The form's counts, shape, period and region, or the defaults where they are missing
    or not numbers (whatever was typed, a NUL byte included, never reaches a query)."""
    data = form.data if form.is_bound else request.GET
    try:
        gpu_count = max(1, int(data.get("gpu_count") or 1))
        node_count = max(1, int(data.get("node_count") or 2))
        # At most what may be booked: a longer window is no one's (and 10**400 days overflow).
        period_count = min(max(1, int(data.get("period_count") or 1)), limits.period_count_max())
    except ValueError:
        gpu_count = period_count = 1
        node_count = 2
    # Matched in Python, never as a query's parameter.
    periods = list(RentalPeriod.objects.filter(is_active=True).order_by("duration"))
    period = next((p for p in periods if p.slug == data.get("period")), None) or (
        periods[0] if periods else None
    )
    regions = list(Region.objects.filter(nodes__gpu_model=gpu_model).distinct().order_by("name_en"))
    return _Choice(
        shape="nodes" if data.get("shape") == "nodes" and clusters else "gpus",
        gpu_count=gpu_count,
        node_count=node_count,
        period=period,
        period_count=period_count,
        region=next((r for r in regions if r.slug == data.get("region")), None),
        regions=regions,
        periods=periods,
        # only what reads as a version narrows the calendar (the form names the rest)
        requires=Requires.of(
            {name: (data.get(name) or "").strip()[:40] for name in REQUIRES
             if not requires_errors({name: data.get(name) or ""})}
        ),
    )  # fmt: skip


def _start_then_url(gpu_model, choice: _Choice, windows: list, now) -> str | None:
    """The booking form filled in to start at the earliest window that fits ("Start then")."""
    if not windows or not choice.period:
        return None
    at = _ceil_minute(windows[0]["starts_at"])
    params: dict[str, str | int] = {
        "shape": choice.shape, "gpu_count": choice.gpu_count, "node_count": choice.node_count,
        "period": choice.period.slug, "period_count": choice.period_count,
    }  # fmt: skip
    if choice.region:
        params["region"] = choice.region.slug
    params |= {k: v for k, v in choice.requires.as_fields().items() if v}
    if at > now + timedelta(minutes=1):
        params |= {
            "start": "later",
            "starts_at": timezone.localtime(at).strftime("%Y-%m-%dT%H:%M"),
        }
    return f"{reverse('book', args=[gpu_model.slug])}?{urlencode(params)}"


def _requote_url(quote, *, starts_at=None):
    """The booking form with the quote's choices (count, period, options) and, when given,
    the start that fits."""
    count = (
        {"shape": "nodes", "node_count": quote.node_count}
        if quote.node_count
        else {"gpu_count": quote.gpu_count}
    )
    params = {**count, "period": quote.period.slug, "period_count": quote.period_count}
    for line in quote.lines.all():
        if line.option_id:
            params[f"option_{line.option.slug}"] = line.count
            if line.note:
                params[f"option_{line.option.slug}_input"] = line.note
    if quote.region_id:
        params["region"] = quote.region.slug
    params |= {k: v for k, v in quote.requires.as_fields().items() if v}
    if starts_at is not None:
        at = timezone.localtime(_ceil_minute(starts_at)).strftime("%Y-%m-%dT%H:%M")
        params |= {"start": "later", "starts_at": at}
    return f"{reverse('book', args=[quote.gpu_model.slug])}?{urlencode(params)}"
