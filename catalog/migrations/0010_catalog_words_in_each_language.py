# The words customers read, in each language (django-translated-fields): the English
# column is the old one renamed, so nothing is lost; Polish starts empty and falls back.

from django.db import migrations, models

# model, field, the field as it stands (the English column), blank in Polish
FIELDS = [
    ("gpumodel", "interconnect", models.CharField(blank=True, max_length=80, verbose_name="GPU-to-GPU link")),
    ("gpumodel", "notes", models.TextField(blank=True, verbose_name="notes")),
    ("rentalperiod", "name", models.CharField(max_length=40, verbose_name="name")),
    ("option", "name", models.CharField(max_length=80, verbose_name="name")),
    ("option", "description", models.TextField(blank=True, verbose_name="description")),
    ("option", "unit", models.CharField(help_text="TB, address, setup…", max_length=20, verbose_name="unit")),
    ("region", "name", models.CharField(max_length=80, verbose_name="name")),
]  # fmt: skip


def _polish(field):
    name, path, args, kwargs = field.deconstruct()
    return field.__class__(*args, **(kwargs | {"blank": True}))


class Migration(migrations.Migration):
    dependencies = [("catalog", "0009_node_ssh_details")]

    operations = [
        *(
            migrations.RenameField(model_name=model, old_name=name, new_name=f"{name}_en")
            for model, name, _ in FIELDS
        ),
        *(
            migrations.AlterField(model_name=model, name=f"{name}_en", field=field)
            for model, name, field in FIELDS
        ),
        *(
            migrations.AddField(model_name=model, name=f"{name}_pl", field=_polish(field))
            for model, name, field in FIELDS
        ),
        migrations.AlterModelOptions(name="option", options={"ordering": ["name_en"]}),
        migrations.AlterModelOptions(name="region", options={"ordering": ["name_en"]}),
    ]
