"""The fleet report's closed steps (`AllocatedStep`, `LedgerDay`) now belong to the reports
app (reports 0001 takes them over). State only: their tables, with their rows, stay as they
are, under rentals' names."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("rentals", "0037_quote_requires")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="AllocatedStep"),
                migrations.DeleteModel(name="LedgerDay"),
            ],
        )
    ]
