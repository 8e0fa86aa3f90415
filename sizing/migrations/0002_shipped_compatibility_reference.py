"""The shipped compatibility reference (sizing/reference.py), loaded once; later shipped
tables load with `manage.py compatibility_reference_load`, which keeps staff's rows."""

from django.db import migrations

from sizing.compat_reference import reference_load


def load(apps, schema_editor):
    reference_load(
        toolkits=apps.get_model("sizing", "CudaToolkit"),
        builds=apps.get_model("sizing", "FrameworkBuild"),
        rocm=apps.get_model("sizing", "RocmRelease"),
    )


class Migration(migrations.Migration):
    dependencies = [("sizing", "0001_compatibility_reference")]

    operations = [migrations.RunPython(load, migrations.RunPython.noop)]
