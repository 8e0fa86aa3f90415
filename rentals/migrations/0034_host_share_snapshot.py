"""Quotes and allocations keep the host share sold with each GPU (issue 47), as their GPU
model has it now: the catalog had no such figure before, so this is what every earlier
booking gets."""

from django.db import migrations, models

FILL = """
UPDATE rentals_{table} t SET vcpus_per_gpu = m.vcpus_per_gpu, ram_gib_per_gpu = m.ram_gib_per_gpu
FROM catalog_gpumodel m WHERE m.id = t.gpu_model_id
"""


def _fields(model_name):
    return [
        migrations.AddField(
            model_name=model_name,
            name="vcpus_per_gpu",
            field=models.PositiveSmallIntegerField(default=1, verbose_name="vCPUs per GPU"),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name=model_name,
            name="ram_gib_per_gpu",
            field=models.PositiveIntegerField(default=1, verbose_name="RAM per GPU (GiB)"),
            preserve_default=False,
        ),
        migrations.RunSQL(FILL.format(table=model_name), migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name=model_name,
            constraint=models.CheckConstraint(
                condition=models.Q(("ram_gib_per_gpu__gte", 1), ("vcpus_per_gpu__gte", 1)),
                name=f"rentals_{model_name}_host_share_positive",
            ),
        ),
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0011_host_share_per_gpu"),
        ("rentals", "0033_dashboard_closed_steps"),
    ]

    operations = [*_fields("quote"), *_fields("allocation")]
