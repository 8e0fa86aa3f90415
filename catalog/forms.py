from datetime import UTC

from django import forms
from django.utils.translation import gettext_lazy as _

from catalog.models import Option, RentalPeriod


class QuoteForm(forms.Form):
    """The booking form's input; the quote service does the real validation."""

    gpu_count = forms.IntegerField(label=_("GPUs"), min_value=1, max_value=64, initial=1)
    period = forms.ModelChoiceField(
        label=_("Rental period"),
        queryset=RentalPeriod.objects.filter(is_active=True),
        to_field_name="slug",
        empty_label=None,
    )
    period_count = forms.IntegerField(label=_("Number of periods"), min_value=1, initial=1)
    start = forms.ChoiceField(
        label=_("Start"),
        choices=[("now", _("Now")), ("later", _("At a date and time (UTC)"))],
        initial="now",
        widget=forms.RadioSelect,
    )
    starts_at = forms.DateTimeField(
        label=_("Start (UTC)"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
    )

    def __init__(self, *args, gpu_model, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = [
            o
            for o in Option.objects.filter(is_active=True).prefetch_related("gpu_models")
            if not o.gpu_models.all() or gpu_model in o.gpu_models.all()
        ]
        for option in self.options:
            self.fields[f"option_{option.slug}"] = forms.IntegerField(
                label=f"{option.name} ({option.unit})",
                min_value=0,
                max_value=option.max_quantity,
                initial=0,
                required=False,
                help_text=option.description,
            )

    def option_fields(self):
        return [self[f"option_{o.slug}"] for o in self.options]

    def clean(self):
        data = super().clean()
        if data.get("start") == "later":
            if not data.get("starts_at"):
                self.add_error("starts_at", _("Choose the start date and time."))
            else:
                data["starts_at"] = data["starts_at"].replace(tzinfo=UTC)
        else:
            data["starts_at"] = None
        return data

    def quote_input(self):
        data = self.cleaned_data
        return {
            "gpu_count": data["gpu_count"],
            "period": data["period"].slug,
            "period_count": data["period_count"],
            "starts_at": data["starts_at"],
            "options": [
                {"option": o.slug, "quantity": data[f"option_{o.slug}"]}
                for o in self.options
                if data.get(f"option_{o.slug}")
            ],
        }
