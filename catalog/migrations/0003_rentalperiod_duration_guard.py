"""Once the catalog's own guard on a period's duration; the guard reads quotes, so it now
belongs to rentals (rentals 0006 replaces it). Kept as a no-op so the history stays whole."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("catalog", "0002_node_telemetry_url_internal_hosts")]

    operations = []
