"""The catalog with what is free now, the booking form, the quote and booking from it.

Writes go through the same services as the API; refusals are acted on by type."""

import uuid
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from accounts.access import acting_for_request
from catalog.models import GpuModel
from catalog.selectors import gpu_price_history
from core.db import db_now
from core.errors import DomainError
from rentals import selectors, services
from rentals.availability import gpu_model_offers
from rentals.errors import NoCapacity, QuoteExpired, QuoteUsed
from rentals.forms import GpuModelFilterForm, QuoteForm
from rentals.idempotency import idempotent
from rentals.views import key_refused, requoted

SPEC_TERMS = {"vram": "vram", "cuda": "cuda", "rocm": "rocm", "fp8": "quantization"}


def catalog_page(request):
    filters = GpuModelFilterForm({k: v for k, v in request.GET.items() if v})
    valid = filters.is_valid()
    models = list(gpu_model_offers(filters=filters.cleaned_data if valid else {}))
    return render(
        request,
        "catalog/catalog.html",
        {
            "models": models,
            "filter_errors": None if valid else filters.errors,
            "query": request.GET,
            "nav": "catalog",
        },
    )


def _apply_errors(form, exc: ValidationError):
    for field, messages_ in exc.message_dict.items():
        name = field if field in form.fields else None
        if field.startswith("options"):
            name = None
        for message in messages_:
            form.add_error(name, message)


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
            except ValidationError as exc:
                _apply_errors(form, exc)
            except NoCapacity as exc:
                form.add_error(None, exc.detail)
                earliest = _ceil_minute(exc.earliest_start)
            except DomainError as exc:
                form.add_error(None, exc.detail)
            else:
                return redirect("quote", pk=quote.pk)
    else:
        form = QuoteForm(gpu_model=gpu_model, initial=request.GET.dict() or None)
    return render(
        request,
        "catalog/book.html",
        {
            "gpu_model": gpu_model,
            "form": form,
            "earliest": earliest,
            "price_history": gpu_price_history(gpu_model=gpu_model),
            "nav": "catalog",
        },
    )


@login_required
def quote_page(request, pk):
    quote = selectors.quote_get(acting=acting_for_request(request), pk=pk)
    if quote is None:
        raise Http404
    return render(
        request,
        "catalog/quote.html",
        {"quote": quote, "idempotency_key": uuid.uuid4(), "nav": "catalog"},
    )


@login_required
@require_POST
@idempotent(
    refused=key_refused(
        back="quote",
        in_flight_to="allocation-list",
        in_flight=gettext_lazy("Your booking is being processed."),
    )
)
def quote_book(request, pk):
    """Book from the quote page. The form's own key makes a double submit book once."""
    quote = selectors.quote_get(acting=acting_for_request(request), pk=pk)
    if quote is None:
        raise Http404
    try:
        allocation = services.allocation_book(acting=acting_for_request(request), quote=quote)
    except QuoteExpired:
        return _requote(request, quote)
    except (QuoteUsed, NoCapacity) as exc:
        messages.error(request, exc.detail)
        return redirect(_requote_url(quote))
    except DomainError as exc:
        return render(
            request,
            "catalog/quote.html",
            {"quote": quote, "idempotency_key": uuid.uuid4(), "refusal": exc.detail},
            status=exc.status,
        )
    messages.success(request, _("Booked. Your GPUs are reserved for the paid period."))
    return redirect("allocation-detail", pk=allocation.pk)


def _requote(request, quote):
    """An expired quote: price the same request again and show the new total to confirm."""
    starts_at = None if quote.starts_now or quote.paid_from <= db_now() else quote.paid_from
    try:
        fresh = services.quote_create(
            acting=acting_for_request(request),
            gpu_model=quote.gpu_model.slug,
            gpu_count=quote.gpu_count,
            period=quote.period.slug,
            period_count=quote.period_count,
            starts_at=starts_at,
            options=[
                {"option": option.slug, "quantity": quantity}
                for option, quantity in selectors.quote_options(quote=quote)
            ],
        )
    except (ValidationError, DomainError) as exc:
        messages.error(request, getattr(exc, "detail", None) or " ".join(exc.messages))
        return redirect(_requote_url(quote))
    return requoted(request, expired=quote, fresh=fresh)


def _requote_url(quote):
    params = {
        "gpu_count": quote.gpu_count,
        "period": quote.period.slug,
        "period_count": quote.period_count,
    }
    return f"{reverse('book', args=[quote.gpu_model.slug])}?{urlencode(params)}"
