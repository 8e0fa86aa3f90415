"""The staff usage page (/usage/): the fleet dashboard and its tables as CSV."""

from django.shortcuts import render

from catalog.models import NodeHealth
from core.csv import csv_response
from core.decorators import staff_required
from rentals.dashboard import dashboard_tables, fleet_dashboard_cached
from rentals.forms import DashboardForm


@staff_required
def usage_page(request):
    form = DashboardForm(request.GET)
    days = form.cleaned_data["days"] if form.is_valid() else DashboardForm.DEFAULT_DAYS
    context = fleet_dashboard_cached(days=days)
    if table := request.GET.get("csv"):
        tables = dashboard_tables(context)
        table = table if table in tables else "over_time"
        header, rows = tables[table]
        return csv_response(filename=f"anchorgpu-{table}.csv", header=header, rows=rows)
    # The cached figures are the same in every language: the health names are put in the
    # reader's here.
    health = [(NodeHealth(k).label, n) for k, n in context["health"].items()]
    context.update({"days": days, "nav": "usage", "health_counts": health})
    return render(request, "rentals/usage.html", context)
