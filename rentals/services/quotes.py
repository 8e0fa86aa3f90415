"""Complete quotes: every line priced now and frozen, the total exactly their sum."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from accounts.buyer import team_tax_treatment
from accounts.models import Team
from accounts.roles import Acting, Action
from catalog.models import GpuModel, NodeState, Option, OptionBilling, Region, RentalPeriod
from catalog.selectors import catalog_rows, gpu_price_at, option_price_at
from catalog.software import NO_REQUIRES, Requires, requires_errors
from core.dates import when_text
from core.db import constraint_name, db_now, prefetched
from core.errors import Invalid
from core.money import Money
from core.vat import TaxTreatment, rate_for, vat_split
from rentals import limits
from rentals.errors import NoCapacity
from rentals.models import Quote, QuoteLine, QuoteLineKind
from rentals.selectors.availability import (
    cluster_fits,
    cluster_shape,
    earliest_start,
    fits,
    max_gpus_per_node,
)

# A request's options as sent: [{option: slug, quantity: n, input?: text}], checked here.
RequestedOptions = list[dict[str, Any]]

_Active = TypeVar("_Active", GpuModel, RentalPeriod, Option)


def _get_active(
    model: type[_Active],
    slug: object,
    field: str,
    errors: dict[str, str],
    label: str,
    *,
    active: Mapping[str, _Active] | None = None,
) -> _Active | None:
    """The active row with that slug (from `active`, slug → row, where given), or a field
    error."""
    if not isinstance(slug, str) or not slug:
        errors[field] = _("Choose a %(label)s.") % {"label": label}
        return None
    if active is not None:
        obj = active.get(slug)
    else:
        obj = model.objects.filter(slug=slug, is_active=True).first()
    if obj is None:
        errors[field] = _("Unknown or unavailable %(label)s: %(slug)s.") % {
            "label": label,
            "slug": slug,
        }
    return obj


_CONSTRAINT_FIELDS = {
    "rentals_quote_period_not_empty": "period_count",
    "rentals_quote_total_not_negative": "options",
    "rentals_quote_gpu_count_positive": "gpu_count",
    "rentals_quote_period_count_positive": "period_count",
    "rentals_quote_node_count_positive": "node_count",
}


def quote_store(quote: Quote, *, lines: list[QuoteLine], total: Money, now: datetime) -> Quote:
    """Save a quote with its lines in order, its VAT for its team, its total and its
    validity (booking and extension quotes alike); `total` is the lines' net sum."""
    quote_taxed(quote, lines=lines, net=total, team=quote.team)
    quote.valid_until = now + settings.ANCHORGPU["QUOTE_VALIDITY"]
    # The service checked every input above; the table's constraints guard what it missed,
    # named back to the field (no full_clean(): a query per constraint and foreign key).
    try:  # no savepoint: a refusal here rolls the caller's whole transaction back
        quote.save(force_insert=True)
    except IntegrityError as exc:
        field = _CONSTRAINT_FIELDS.get(constraint_name(exc) or "")
        if field is None:
            raise
        raise Invalid({field: _("This value is out of range.")}) from exc
    for position, line in enumerate(lines):
        line.quote, line.position = quote, position
    QuoteLine.objects.bulk_create(lines)
    prefetched(quote, "lines", lines)  # the caller reads the whole quote without a query
    return quote


def quote_taxed(quote: Quote, *, lines: list[QuoteLine], net: Money, team: Team | None) -> None:
    """Add the VAT of `team`'s treatment (no team: a consumer's) to the quote and its lines:
    VAT on the net total, rounded once, shared out over the lines (core.vat); the total is
    the gross."""
    treatment = team_tax_treatment(team) if team is not None else TaxTreatment.CONSUMER
    rate = rate_for(treatment)
    shares, vat = vat_split([line.amount for line in lines], rate, net.currency)
    for line, share in zip(lines, shares, strict=True):
        line.vat = share
    quote.tax_treatment, quote.vat_rate = treatment, rate
    quote.net_total, quote.vat_total = net.amount, vat
    quote.total, quote.currency = net.amount + vat, net.currency


def quote_lines(
    *,
    gpu_model: GpuModel,
    gpu_count: int,
    period: RentalPeriod,
    period_count: int,
    options: list[tuple[Option, int]],
    at: datetime,
    notes: dict[str, str] | None = None,
) -> tuple[list[QuoteLine], Money]:
    """The priced lines of a quote and their total, at the prices in force at `at`: the GPU
    line, then one line per chosen option (with what the customer said for an option that
    asks, `notes` by option slug). A missing price is refused, never skipped."""
    notes = notes or {}
    gpu_price = gpu_price_at(gpu_model=gpu_model, period=period, at=at)
    if gpu_price is None:
        raise Invalid({"period": _("This model is not offered per %s.") % period})
    unit = Money(gpu_price.unit_price, gpu_price.currency)
    lines = [
        QuoteLine(
            kind=QuoteLineKind.GPU,
            count=gpu_count,
            periods=period_count,
            quantity=gpu_count * period_count,
            unit_price=unit.amount,
            amount=(unit * (gpu_count * period_count)).amount,
        )
    ]
    total = unit * (gpu_count * period_count)
    for option, quantity in options:
        price_period = period if option.billing == OptionBilling.PER_PERIOD else None
        price = option_price_at(option=option, period=price_period, at=at)
        if price is None:
            raise Invalid({"options": _("%s has no price for this period.") % option})
        if price.currency != unit.currency:
            raise Invalid(
                {
                    "options": _(
                        "%(option)s is priced in %(theirs)s and the GPUs in %(ours)s; "
                        "a quote has one currency."
                    )
                    % {"option": option, "theirs": price.currency, "ours": unit.currency}
                }
            )
        option_unit = Money(price.unit_price, price.currency)
        units = quantity * (period_count if price_period else 1)
        amount = option_unit * units
        total = total + amount
        lines.append(
            QuoteLine(
                kind=QuoteLineKind.OPTION,
                option=option,
                count=quantity,
                periods=period_count if price_period else None,
                quantity=units,
                unit_price=option_unit.amount,
                amount=amount.amount,
                note=notes.get(option.slug, ""),
            )
        )
    return lines, total


@dataclass(frozen=True)
class QuoteRequest:
    """A quote request that passed its checks: the catalog rows it names and its counts."""

    gpu_model: GpuModel
    period: RentalPeriod
    gpu_count: int  # a cluster's: node_count × GPUs per node
    node_count: int | None
    period_count: int
    starts_at: datetime | None  # None: starts when booked
    options: list[tuple[Option, int]]
    region: Region | None = None  # None: any region
    notes: dict[str, str] | None = None  # option slug → what the customer said (Option.input_label)
    requires: Requires = NO_REQUIRES  # minimum driver, CUDA, ROCm versions of the node


@transaction.atomic
def quote_create(
    *,
    acting: Acting,
    gpu_model: str,
    gpu_count: int | None = None,
    node_count: int | None = None,
    period: str,
    period_count: int,
    starts_at: datetime | None = None,
    options: RequestedOptions | None = None,
    region: str | None = None,
    requires_driver: str = "",
    requires_cuda: str = "",
    requires_rocm: str = "",
    now: datetime | None = None,
) -> Quote:
    """Price a request and store it as a snapshot valid for a limited time: `gpu_count`
    GPUs on one node, or `node_count` whole nodes of one network group (a cluster, whose
    GPU line is node_count × GPUs per node), on nodes of `region` (a slug) or any region
    whose software stack meets the `requires_*` minimum versions (empty: any).

    Raises Invalid with field errors for bad input, NoCapacity (with the
    earliest start that would fit) when no node has enough free GPUs.
    """
    acting.require(Action.BOOK)
    now = now or db_now()
    quote, lines, total = _quote_priced(
        gpu_model=gpu_model, gpu_count=gpu_count, node_count=node_count, period=period,
        period_count=period_count, starts_at=starts_at, options=options, region=region,
        requires_driver=requires_driver, requires_cuda=requires_cuda,
        requires_rocm=requires_rocm, now=now,
    )  # fmt: skip
    _capacity_check(quote)
    quote.team, quote.user = acting.team, acting.user
    return quote_store(quote, lines=lines, total=total, now=now)


def quote_estimate(
    *,
    gpu_model: str,
    gpu_count: int | None = None,
    node_count: int | None = None,
    period: str,
    period_count: int,
    starts_at: datetime | None = None,
    options: RequestedOptions | None = None,
    region: str | None = None,
    requires_driver: str = "",
    requires_cuda: str = "",
    requires_rocm: str = "",
    team: Team | None = None,
    now: datetime | None = None,
) -> Quote:
    """What `quote_create` would price for the request, by the same code, stored nowhere:
    the booking form's running total, taxed for `team` (none: a consumer). An unsaved
    quote whose `lines.all()` are its lines; capacity is not checked (the quote checks it),
    and nothing is valid until quoted.

    Raises Invalid with field errors for bad input, as quote_create does.
    """
    quote, lines, total = _quote_priced(
        gpu_model=gpu_model, gpu_count=gpu_count, node_count=node_count, period=period,
        period_count=period_count, starts_at=starts_at, options=options, region=region,
        requires_driver=requires_driver, requires_cuda=requires_cuda,
        requires_rocm=requires_rocm, now=now or db_now(),
    )  # fmt: skip
    quote_taxed(quote, lines=lines, net=total, team=team)
    for position, line in enumerate(lines):
        line.quote, line.position = quote, position
    prefetched(quote, "lines", lines)
    return quote


def _quote_priced(*, now: datetime, **requested: Any) -> tuple[Quote, list[QuoteLine], Money]:
    """The request checked and priced at `now`: an unsaved quote (no team, user, total or
    validity yet), its lines and their total. The one pricing path of quotes and estimates."""
    request = quote_request_check(**requested, now=now)
    paid_from, paid_until = _paid_window(request, now)
    lines, total = quote_lines(
        gpu_model=request.gpu_model,
        gpu_count=request.gpu_count,
        period=request.period,
        period_count=request.period_count,
        options=request.options,
        at=now,
        notes=request.notes,
    )
    quote = Quote(
        gpu_model=request.gpu_model,
        gpu_count=request.gpu_count,
        node_count=request.node_count,
        period=request.period,
        period_count=request.period_count,
        region=request.region,
        **request.requires.as_fields(),
        paid_from=paid_from,
        paid_until=paid_until,
        starts_now=request.starts_at is None,
        vcpus_per_gpu=request.gpu_model.vcpus_per_gpu,
        ram_gib_per_gpu=request.gpu_model.ram_gib_per_gpu,
    )
    return quote, lines, total


def quote_request_check(
    *, gpu_model: str, gpu_count: int | None, node_count: int | None, period: str,
    period_count: int, starts_at: datetime | None, options: RequestedOptions | None,
    now: datetime, region: str | None = None, requires_driver: str = "",
    requires_cuda: str = "", requires_rocm: str = "",
) -> QuoteRequest:  # fmt: skip
    """The request's catalog rows and counts, or Invalid with every field's
    refusal at once."""
    errors: dict[str, str] = {}
    rows = catalog_rows()
    model = _get_active(
        GpuModel, gpu_model, "gpu_model", errors, _("GPU model"), active=rows.models
    )
    rental_period = _get_active(
        RentalPeriod, period, "period", errors, _("rental period"), active=rows.periods
    )
    if (gpu_count is None) == (node_count is None):
        errors["gpu_count"] = _("Ask for either a GPU count or a node count.")
    elif node_count is not None:
        gpu_count = _cluster_gpu_count(node_count, model, errors)
    else:
        _gpu_count_check(gpu_count, model, errors)
    if refusal := limits.period_count_refusal(period_count):
        errors["period_count"] = refusal
    if starts_at is not None:
        _start_check(starts_at, now, errors)
    notes: dict[str, str] = {}
    chosen = _options(options, model, rental_period, errors, notes=notes)
    _lead_times_check(options, chosen, starts_at, now, errors)
    chosen_region = _region(region, model, errors) if region not in (None, "") else None
    asked = {"requires_driver": requires_driver or "", "requires_cuda": requires_cuda or "",
             "requires_rocm": requires_rocm or ""}  # fmt: skip
    errors.update(requires_errors(asked))
    if errors:
        raise Invalid(errors)
    # each of these, missing, left a field error above
    assert model is not None and rental_period is not None and gpu_count is not None
    return QuoteRequest(
        gpu_model=model, period=rental_period, gpu_count=gpu_count, node_count=node_count,
        period_count=period_count, starts_at=starts_at, options=chosen, region=chosen_region,
        notes=notes, requires=Requires.of(asked),
    )  # fmt: skip


def _region(slug: object, model: GpuModel | None, errors: dict[str, str]) -> Region | None:
    """The region with that slug, if the model has active nodes there, or a field error."""
    if not isinstance(slug, str):
        errors["region"] = _("Choose a region by its slug.")
        return None
    found = (
        Region.objects.filter(slug=slug)
        .annotate(
            nodes_of_model=Count(
                "nodes",
                filter=Q(nodes__gpu_model=model, nodes__state=NodeState.ACTIVE),
            )
        )
        .first()
    )
    if found is None:
        errors["region"] = _("Unknown region: %(slug)s.") % {"slug": slug}
        return None
    if model is not None and not found.nodes_of_model:
        errors["region"] = _("%(model)s is not offered in %(region)s.") % {
            "model": model.name,
            "region": found.name,
        }
        return None
    return found


def _gpu_count_check(gpu_count: int | None, model: GpuModel | None, errors: dict[str, str]) -> None:
    if not limits.within(gpu_count, 1, limits.GPU_COUNT_MAX):
        errors["gpu_count"] = _("GPU count must be a whole number from 1 to %(max)s.") % {
            "max": limits.GPU_COUNT_MAX
        }
    elif model is not None:
        per_node = max_gpus_per_node(gpu_model=model)
        if gpu_count > per_node:
            errors["gpu_count"] = ngettext(
                "At most %(n)s GPU of this model fits on one node; an allocation uses one node.",
                "At most %(n)s GPUs of this model fit on one node; an allocation uses one node.",
                per_node,
            ) % {"n": per_node}


def _start_check(starts_at: datetime, now: datetime, errors: dict[str, str]) -> None:
    if timezone.is_naive(starts_at):
        errors["starts_at"] = _("Give the start with a time zone (UTC recommended).")
    elif starts_at < now:
        errors["starts_at"] = _("The start is in the past; choose now or a later time.")
    elif starts_at > now + limits.schedule_ahead_max():
        errors["starts_at"] = _("The start is too far ahead (at most %(days)s days).") % {
            "days": limits.schedule_ahead_max().days
        }


def _paid_window(request: QuoteRequest, now: datetime) -> tuple[datetime, datetime]:
    """[paid_from, paid_until): from now or the chosen start, whole periods long."""
    paid_from = (now if request.starts_at is None else request.starts_at).astimezone(UTC)
    return paid_from, paid_from + request.period.duration * request.period_count


def _capacity_check(quote: Quote) -> None:
    if refusal := quote_capacity_refusal(quote=quote):
        raise refusal


class _Window(TypedDict):
    starts_at: datetime
    ends_at: datetime
    region_id: int | None
    requires: Requires


def quote_capacity_refusal(*, quote: Quote) -> NoCapacity | None:
    """Why the quote's window cannot be held now: no node (a cluster: no network group) of
    its region (or any) has it free; the refusal names the earliest start that would fit.
    None when it fits. What quote_create refuses, and what an estimate says beside its total."""
    model, node_count, region_id = quote.gpu_model, quote.node_count, quote.region_id
    window: _Window = {"starts_at": quote.paid_from, "ends_at": quote.paid_until, "region_id": region_id,
              "requires": quote.requires}  # fmt: skip
    if node_count:
        fitting = cluster_fits(gpu_model=model, node_count=node_count, **window)
    else:
        fitting = fits(gpu_model=model, gpu_count=quote.gpu_count, **window)
    if fitting:
        return None
    return no_capacity(
        gpu_model=model, gpu_count=quote.gpu_count, node_count=node_count,
        starts_at=quote.paid_from, ends_at=quote.paid_until, region=quote.region,
        field="starts_at", requires=quote.requires,
    )  # fmt: skip


def no_capacity(
    *, gpu_model: GpuModel, gpu_count: int, node_count: int | None, starts_at: datetime,
    ends_at: datetime, region: Region | None = None, field: str | None = None,
    requires: Requires = NO_REQUIRES,
) -> NoCapacity:  # fmt: skip
    """The refusal of a window that does not fit, naming the earliest start that would (in
    `region` where one was chosen; for a quote, and for a booking that lost its GPUs since)."""
    if region is not None:
        detail = (
            _("Not enough free whole %(model)s nodes in one network group in %(region)s for "
              "that period.")
            if node_count
            else _("Not enough free %(model)s GPUs in %(region)s for that period.")
        )  # fmt: skip
    else:
        detail = (
            _("Not enough free whole %(model)s nodes in one network group for that period.")
            if node_count
            else _("Not enough free %(model)s GPUs for that period.")
        )
    detail = detail % {"model": gpu_model.name, "region": getattr(region, "name", "")}
    if requires:
        detail = _("%(detail)s (on nodes with %(requires)s)") % {
            "detail": detail.rstrip("."),
            "requires": requires.words(),
        }
    return NoCapacity(
        detail,
        earliest_start=earliest_start(
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            node_count=node_count,
            duration=ends_at - starts_at,
            not_before=starts_at,
            region_id=getattr(region, "pk", None),
            requires=requires,
        ),
        field=field,
    )


def _cluster_gpu_count(
    node_count: int, model: GpuModel | None, errors: dict[str, str]
) -> int | None:
    """node_count × the GPUs of one clusterable node, or None with a field error."""
    if not limits.within(node_count, 1, limits.NODE_COUNT_MAX):
        errors["node_count"] = _("Node count must be a whole number from 1 to %(max)s.") % {
            "max": limits.NODE_COUNT_MAX
        }
        return None
    if model is None:
        return None
    per_node, largest_group = cluster_shape(gpu_model=model)
    if node_count > largest_group:
        errors["node_count"] = (
            _("At most %(n)s whole nodes of this model share one network group.")
            % {"n": largest_group}
            if largest_group
            else _("No nodes of this model are in a network group; clusters are not offered.")
        )
        return None
    return node_count * per_node


NOTE_MAX = 200  # QuoteLine.note


def _lead_times_check(
    requested: RequestedOptions | None,
    chosen: list[tuple[Option, int]],
    starts_at: datetime | None,
    now: datetime,
    errors: dict[str, str],
) -> None:
    """An option that needs time before the start (`lead_time`: an image to build) cannot
    start now, nor sooner than that: the refusal names the earliest start it allows."""
    for index, (option, _quantity) in enumerate(chosen):
        if not option.lead_time:
            continue
        earliest = now + option.lead_time
        if starts_at is None or (timezone.is_aware(starts_at) and starts_at < earliest):
            field = _option_field(requested, option.slug, index)
            hours = max(1, round(option.lead_time.total_seconds() / 3600))
            errors[field] = ngettext(
                "%(option)s needs %(hours)s hour before the start: choose a start at or "
                "after %(at)s.",
                "%(option)s needs %(hours)s hours before the start: choose a start at or "
                "after %(at)s.",
                hours,
            ) % {"option": option.name, "hours": hours, "at": when_text(earliest)}


def _option_field(requested: RequestedOptions | None, slug: str, fallback: int) -> str:
    """The error key of the requested option with that slug (`options.<its index>`)."""
    for index, item in enumerate(requested or []):
        if isinstance(item, dict) and item.get("option") == slug:
            return f"options.{index}"
    return f"options.{fallback}"


def _options(
    requested: RequestedOptions | None,
    model: GpuModel | None,
    period: RentalPeriod | None,
    errors: dict[str, str],
    *,
    notes: dict[str, str] | None = None,
) -> list[tuple[Option, int]]:
    """[(Option, quantity)] from [{option: slug, quantity: n, input?: text}], with field
    errors; what the customer said for an option that asks goes into `notes` (by slug)."""
    notes = {} if notes is None else notes
    if requested in (None, []):
        return []
    if not isinstance(requested, list):
        errors["options"] = _("Options must be a list.")
        return []
    chosen: list[tuple[Option, int]] = []
    seen: set[object] = set()  # the slugs as sent
    for index, item in enumerate(requested):
        field = f"options.{index}"
        if not isinstance(item, dict):
            errors[field] = _("Each option is {option, quantity}.")
            continue
        slug, quantity = item.get("option"), item.get("quantity", 1)
        option = _get_active(Option, slug, field, errors, _("option"))
        if option is None:
            continue
        if slug in seen:
            errors[field] = _("%s is chosen twice.") % option
            continue
        seen.add(slug)
        if model is not None:
            applies = option.gpu_models.all()
            if applies and model not in applies:
                errors[field] = _("%(option)s is not available with %(model)s.") % {
                    "option": option,
                    "model": model,
                }
                continue
        if not limits.within(quantity, 1, option.max_quantity):
            errors[field] = _("Quantity of %(option)s must be between 1 and %(max)s.") % {
                "option": option,
                "max": option.max_quantity,
            }
            continue
        given = item.get("input")
        if given is not None and not isinstance(given, str):
            errors[field] = _("The input of %(option)s is text.") % {"option": option}
            continue
        given = (given or "").strip()
        if option.input_label and not given:
            errors[field] = _("%(option)s asks for this: %(asks)s.") % {
                "option": option.name,
                "asks": option.input_label,
            }
            continue
        if given and not option.input_label:
            errors[field] = _("%(option)s takes no input.") % {"option": option.name}
            continue
        if len(given) > NOTE_MAX:
            errors[field] = _("At most %(n)s characters for %(option)s.") % {
                "n": NOTE_MAX,
                "option": option.name,
            }
            continue
        if given:
            notes[option.slug] = given
        chosen.append((option, quantity))
    return chosen


def quotes_expired_purge(
    *, now: datetime | None = None, kept: timedelta = timedelta(days=1)
) -> int:
    """Delete quotes nobody booked, a day after they expired (booked ones stay: they are
    the allocation's contract)."""
    now = now or db_now()
    deleted, _counts = Quote.objects.filter(
        valid_until__lt=now - kept, allocations__isnull=True
    ).delete()
    return deleted
