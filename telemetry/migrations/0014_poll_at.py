# /metrics reads the last five minutes of polls and the raw retention's prune deletes the
# polls older than it: both read a range of `at`, which only the (node, at) index held, so
# each scrape scanned every poll kept (3.6 million rows for an hour at 100k GPUs, 150 ms a
# statement; 72 million a day). Built concurrently: polls are written every round.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("telemetry", "0013_flag_history"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="poll",
            index=models.Index(fields=["at"], name="telemetry_poll_at"),
        ),
    ]
