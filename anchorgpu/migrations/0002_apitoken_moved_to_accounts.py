"""API tokens moved to the accounts app: its migration 0001 takes the model and the table."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("anchorgpu", "0001_initial"), ("accounts", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")], database_operations=[]
        )
    ]
