import datetime

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("rentals", "0042_capacity_incremental"),
    ]

    operations = [
        # The shares were counted from their summary's day; the next refresh (a summary gone
        # is a model's first) rewrites them whole, each with its own first day.
        migrations.RunSQL(
            "DELETE FROM rentals_capacitysummary; DELETE FROM rentals_capacitynodedays",
            migrations.RunSQL.noop,
        ),
        migrations.AddField(
            model_name="capacitynodedays",
            name="first_day",
            field=models.DateField(default=datetime.date(2000, 1, 1)),
            preserve_default=False,
        ),
    ]
