"""The fleet report's page (/usage/, staff only) and its tables as CSV."""

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import render

from catalog.models import NodeHealth
from core.csv import csv_response
from core.decorators import staff_required
from reports.forms import FleetReportForm
from reports.selectors import fleet_report_cached, fleet_report_tables


@staff_required
def fleet_report_page(request: HttpRequest) -> HttpResponseBase:
    form = FleetReportForm(request.GET)
    days = form.cleaned_data["days"] if form.is_valid() else FleetReportForm.DEFAULT_DAYS
    context = fleet_report_cached(days=days)
    if table := request.GET.get("csv"):
        tables = fleet_report_tables(context)
        table = table if table in tables else "over_time"
        header, rows = tables[table]
        return csv_response(filename=f"anchorgpu-{table}.csv", header=header, rows=rows)
    # The cached figures are the same in every language: the health names are put in the
    # reader's here.
    health = [(NodeHealth(k).label, n) for k, n in context["health"].items()]
    context.update({"days": days, "nav": "usage", "health_counts": health})
    return render(request, "reports/fleet_report.html", context)
