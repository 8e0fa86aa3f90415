"""The fleet report's form: the range it covers."""

from django import forms


class FleetReportForm(forms.Form):
    DEFAULT_DAYS = 7
    days = forms.IntegerField(min_value=1, max_value=90, required=False)

    def clean_days(self) -> int:
        return self.cleaned_data["days"] or self.DEFAULT_DAYS
