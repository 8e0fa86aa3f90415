"""Page forms of the rentals layer. Bounds come from rentals.limits, as in the API."""

from datetime import timedelta

from django import forms
from django.core.validators import MaxValueValidator
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from catalog.models import (
    NodeState,
    Option,
    OptionBilling,
    OptionPrice,
    Region,
    RentalPeriod,
    SoftwareStack,
    Vendor,
)
from catalog.selectors import current_option_prices
from catalog.software import REQUIRES, validate_version
from core.money import DECIMAL_PLACES, MAX_DIGITS, money_text
from rentals import limits
from rentals.models import AllocationState, LedgerKind
from rentals.selectors.availability import max_gpus_per_node

REQUIRES_LABELS = {
    "requires_cuda": _("CUDA at least"),
    "requires_driver": _("Driver at least"),
    "requires_rocm": _("ROCm at least"),
}


class GpuModelFilterForm(forms.Form):
    """The catalog page's filters (the API's are GpuModelFilterSerializer)."""

    vendor = forms.ChoiceField(choices=Vendor.choices, required=False)
    min_memory_gb = forms.IntegerField(min_value=0, max_value=100_000, required=False)
    stack = forms.ChoiceField(choices=SoftwareStack.choices, required=False)
    fp8 = forms.NullBooleanField(required=False)
    max_price = forms.DecimalField(
        max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES, min_value=0, required=False
    )
    price_period = forms.SlugField(required=False)
    ordering = forms.ChoiceField(
        choices=[
            (o, o)
            for o in (
                "name",
                "-name",
                "memory_gb",
                "-memory_gb",
                "bandwidth_gbps",
                "-bandwidth_gbps",
            )
        ],
        required=False,
    )

    def clean(self):
        return {k: v for k, v in super().clean().items() if v not in (None, "")}


def _period_count_field(label, **kwargs):
    field = forms.IntegerField(label=label, min_value=1, **kwargs)
    field.max_value = limits.period_count_max()
    field.validators.append(MaxValueValidator(field.max_value))
    field.widget.attrs["max"] = field.max_value
    return field


class ExtendForm(forms.Form):
    """Extend by an extension quote the customer read (`quote`), or price and charge
    `period_count` periods now."""

    quote = forms.UUIDField(required=False)
    period_count = forms.IntegerField(min_value=1, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["period_count"] = _period_count_field(_("Extend by"), required=False)

    def clean(self):
        data = super().clean()
        if not self.errors and bool(data.get("quote")) == bool(data.get("period_count")):
            raise forms.ValidationError(_("Choose how many periods to add."))
        return data


class ExtensionQuoteForm(forms.Form):
    period_count = forms.IntegerField(min_value=1)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["period_count"] = _period_count_field(_("Extend by"))


class OnOffInput(forms.CheckboxInput):
    """A checkbox for an option that is taken once or not at all. It sends `1`, as the
    number box it replaces did, and reads `0` (a link's `option_x=0`) as not chosen."""

    def __init__(self, attrs=None):
        super().__init__(
            attrs={"value": "1", **(attrs or {})},
            check_test=lambda v: v not in (None, False, "", "0", 0),
        )

    def value_from_datadict(self, data, files, name):
        return data.get(name) not in (None, "", "0", "false", "False")


class QuoteForm(forms.Form):
    """The booking form's input; the quote service does the real validation."""

    SHAPES = [
        ("gpus", _("On one node")),
        ("nodes", _("A cluster: whole nodes on one fabric")),
    ]
    shape = forms.ChoiceField(
        label=_("What to rent"), choices=SHAPES, initial="gpus", widget=forms.RadioSelect,
        required=False,
    )  # fmt: skip
    gpu_count = forms.IntegerField(
        label=_("GPUs"), min_value=1, max_value=limits.GPU_COUNT_MAX, initial=1, required=False
    )
    node_count = forms.IntegerField(
        label=_("Node count"), min_value=1, max_value=limits.NODE_COUNT_MAX, initial=2,
        required=False,
    )  # fmt: skip
    period = forms.ModelChoiceField(
        label=_("Rental period"),
        queryset=RentalPeriod.objects.filter(is_active=True),
        to_field_name="slug",
        empty_label=None,
    )
    period_count = forms.IntegerField(label=_("Number of periods"), min_value=1, initial=1)
    start = forms.ChoiceField(
        label=_("Start"),
        choices=[("now", _("Now")), ("later", _("At a date and time"))],
        initial="now",
        widget=forms.RadioSelect,
    )
    starts_at = forms.DateTimeField(
        label=_("Start"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
    )

    def __init__(self, *args, gpu_model, like: "QuoteForm | None" = None, **kwargs):
        """`like`: a form of the same model built for this request, whose options and their
        prices are taken as read rather than read again (the booking page prices a copy)."""
        super().__init__(*args, **kwargs)
        self.gpu_model = gpu_model
        # Entered and shown in the reader's time zone (UTC unless their account says else).
        self.fields["starts_at"].label = _("Start (%(zone)s)") % {
            "zone": timezone.get_current_timezone_name()
        }
        self.fields["period_count"] = _period_count_field(_("Number of periods"), initial=1)
        self._gpu_count_bound(max_gpus_per_node(gpu_model=gpu_model))
        self.fields["region"] = forms.ModelChoiceField(
            label=_("Region"),
            queryset=Region.objects.filter(
                nodes__gpu_model=gpu_model, nodes__state=NodeState.ACTIVE
            ).distinct(),
            to_field_name="slug",
            required=False,
            empty_label=_("Any region"),
        )
        for name, label in REQUIRES_LABELS.items():
            if (name == "requires_rocm") != (gpu_model.vendor == "amd"):
                continue  # what the model's stack has: ROCm for AMD, driver and CUDA else
            self.fields[name] = forms.CharField(
                label=label, required=False, max_length=40, validators=[validate_version],
                help_text=_("minimum version; empty: any"),
            )  # fmt: skip
        self.options: list[Option]
        self.option_prices: dict[int, list[OptionPrice]]
        if like is not None and like.gpu_model == gpu_model:
            self.options, self.option_prices = like.options, like.option_prices
        else:
            self.options = [
                o
                for o in Option.objects.filter(is_active=True).prefetch_related("gpu_models")
                if not o.gpu_models.all() or gpu_model in o.gpu_models.all()
            ]
            self.option_prices = current_option_prices(options=self.options)
        for option in self.options:
            if option.input_label:  # what it asks for (which image): sent with the option
                self.fields[f"option_{option.slug}_input"] = forms.CharField(
                    label=option.input_label, max_length=200, required=False,
                )  # fmt: skip
            field: forms.Field
            if option.max_quantity == 1:  # on or off: a checkbox, not a 0–1 number box
                field = forms.BooleanField(
                    label=option.name, required=False, widget=OnOffInput,
                    help_text=option.description,
                )  # fmt: skip
            else:
                field = forms.IntegerField(
                    label=f"{option.name} ({option.unit})",
                    min_value=0,
                    max_value=option.max_quantity,
                    initial=0,
                    required=False,
                    help_text=option.description,
                )
            self.fields[f"option_{option.slug}"] = field

    def _gpu_count_bound(self, per_node: int) -> None:
        """At most the GPUs of the model's largest node: an allocation uses one node."""
        field = self.fields["gpu_count"]
        assert isinstance(field, forms.IntegerField)  # declared above
        if not 1 <= per_node < limits.GPU_COUNT_MAX:
            return
        field.max_value = per_node
        field.widget.attrs["max"] = per_node
        field.validators = [v for v in field.validators if not isinstance(v, MaxValueValidator)]
        field.validators.append(
            MaxValueValidator(
                per_node,
                message=_(
                    "At most %(limit_value)s GPUs of this model fit on one node; "
                    "an allocation uses one node."
                ),
            )
        )

    def option_fields(self):
        return [self[f"option_{o.slug}"] for o in self.options]

    def option_rows(self) -> list[dict]:
        """Each option's field with its price in words (how it is charged: once, or each
        period at each period's price), the field it asks for input in, and its lead time
        in hours (zero: it can start now)."""
        return [
            {
                "field": self[f"option_{o.slug}"],
                "price": option_price_words(o, self.option_prices.get(o.pk, [])),
                "input": self[f"option_{o.slug}_input"] if o.input_label else None,
                "lead_hours": round(o.lead_time.total_seconds() / 3600),
            }
            for o in self.options
        ]

    def clean(self):
        data = super().clean()
        data["shape"] = data.get("shape") or "gpus"
        count_field = "node_count" if data["shape"] == "nodes" else "gpu_count"
        if not data.get(count_field) and count_field not in self.errors:
            self.add_error(count_field, _("Choose how many."))
        for option in self.options:
            asked = f"option_{option.slug}_input"
            if option.input_label and data.get(f"option_{option.slug}") and not data.get(asked):
                self.add_error(asked, _("Say this to take the option."))
        if data.get("start") == "later":
            if not data.get("starts_at"):
                self.add_error("starts_at", _("Choose the start date and time."))
        else:
            data["starts_at"] = None
        return data

    def quote_input(self):
        data = self.cleaned_data
        if data["shape"] == "nodes":
            count = {"node_count": data["node_count"]}
        else:
            count = {"gpu_count": data["gpu_count"]}
        return {
            **count,
            "period": data["period"].slug,
            "period_count": data["period_count"],
            "starts_at": data["starts_at"],
            "options": [
                {
                    "option": o.slug,
                    "quantity": int(data[f"option_{o.slug}"]),  # True: 1
                    **({"input": data.get(f"option_{o.slug}_input", "")} if o.input_label else {}),
                }
                for o in self.options
                if data.get(f"option_{o.slug}")
            ],
            "region": data["region"].slug if data.get("region") else None,
            **{name: data.get(name) or "" for name in REQUIRES},
        }


def option_price_words(option: Option, prices: list) -> str:
    """ "150.00 USD, charged once"; "4.00 USD a day · 25.00 USD a week, charged each
    period, per TB": what an option costs and how it is charged, net."""
    if not prices:
        return ""
    if option.billing == OptionBilling.ONE_TIME:
        row = prices[0]
        return _("%(price)s, charged once") % {"price": money_text(row.unit_price, row.currency)}
    each = " · ".join(
        _("%(price)s per %(period)s")
        % {"price": money_text(row.unit_price, row.currency), "period": row.period.name}
        for row in prices
        if row.period is not None
    )
    if option.max_quantity > 1:
        return _("%(prices)s, charged each period, per %(unit)s") % {
            "prices": each,
            "unit": option.unit,
        }
    return _("%(prices)s, charged each period") % {"prices": each}


class LedgerFilterForm(forms.Form):
    """The statement's range and kind, for the page and its CSV (the API has a serializer)."""

    since = forms.DateField(
        label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    kind = forms.ChoiceField(
        label=_("Kind"), choices=[("", _("All")), *LedgerKind.choices], required=False
    )

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", _("The end comes before the start."))
        return data


class AllocationFilterForm(forms.Form):
    state = forms.ChoiceField(choices=[("", _("All")), *AllocationState.choices], required=False)
    user = forms.CharField(label=_("Owner"), max_length=150, required=False)
    gpu_model = forms.SlugField(label=_("GPU model"), required=False)
    node = forms.CharField(label=_("Node"), max_length=255, required=False)


class ChartRangeForm(forms.Form):
    """What the allocation's charts cover: the last hour or day, the whole rental so far,
    or a custom range (in the reader's time zone)."""

    RANGES = [
        ("hour", _("Last hour")),
        ("day", _("Last day")),
        ("rental", _("Whole rental")),
        ("custom", _("Custom")),
    ]
    range = forms.ChoiceField(label=_("Range"), choices=RANGES, required=False)
    start = forms.DateTimeField(
        label=_("From"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    end = forms.DateTimeField(
        label=_("To"), required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )

    def clean(self):
        data = super().clean()
        if data.get("range") == "custom":
            if not data.get("start") or not data.get("end"):
                raise forms.ValidationError(_("A custom range needs a start and an end."))
            if data["start"] >= data["end"]:
                raise forms.ValidationError(_("The start must be before the end."))
        return data

    def window(self, *, allocation, now) -> tuple:
        """(start, end) for the charts; the default is the last hour."""
        data = self.cleaned_data if self.is_valid() else {}
        choice = data.get("range") or "hour"
        end = min(now, allocation.paid_until)
        if choice == "custom":
            return data["start"], data["end"]
        if choice == "rental":
            return allocation.paid_from, end
        return end - (timedelta(days=1) if choice == "day" else timedelta(hours=1)), end
