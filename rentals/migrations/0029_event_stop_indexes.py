# The staff dashboard's stopped GPU-hours read the stops and the events leaving "stopped" from
# two partial indexes instead of every event of every allocation (issue 32).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rentals", "0028_holding_node"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="allocationevent",
            index=models.Index(
                condition=models.Q(("to_state", "stopped")),
                fields=["allocation", "at", "id"],
                name="rentals_event_stops",
            ),
        ),
        migrations.AddIndex(
            model_name="allocationevent",
            index=models.Index(
                condition=models.Q(("from_state", "stopped")),
                fields=["allocation", "at", "id"],
                name="rentals_event_stop_ends",
            ),
        ),
    ]
