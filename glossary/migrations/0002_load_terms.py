from django.db import migrations


def load(apps, schema_editor):
    from glossary.services import glossary_terms_load

    glossary_terms_load(term_model=apps.get_model("glossary", "Term"))


def unload(apps, schema_editor):
    apps.get_model("glossary", "Term").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("glossary", "0001_initial")]

    operations = [migrations.RunPython(load, unload)]
