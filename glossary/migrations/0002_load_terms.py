from django.db import migrations


def load(apps, schema_editor):
    from glossary.content import ENGLISH, SLUGS, polish_entries

    Term = apps.get_model("glossary", "Term")
    polish, _ = polish_entries()
    for position, (slug, (pl_term, pl_def), (en_term, en_def)) in enumerate(
        zip(SLUGS, polish, ENGLISH, strict=True)
    ):
        for language, term, definition in (("pl", pl_term, pl_def), ("en", en_term, en_def)):
            Term.objects.update_or_create(
                slug=slug,
                language=language,
                defaults={"term": term, "definition": definition, "position": position},
            )


def unload(apps, schema_editor):
    apps.get_model("glossary", "Term").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("glossary", "0001_initial")]

    operations = [migrations.RunPython(load, unload)]
