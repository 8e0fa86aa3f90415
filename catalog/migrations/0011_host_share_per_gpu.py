"""Each GPU model's host share: vCPUs and GiB of memory with each GPU (issue 47). Models the
demo knows get its figures; any other gets 8 vCPUs and 64 GiB until staff set its own."""

from django.db import migrations, models

# The demo catalog's (catalog.demo.HOST_SHARE, as it stood when this was written).
KNOWN = {
    "h200": (24, 256), "h100-sxm": (24, 256), "a100-80gb": (12, 144), "l40s": (24, 192),
    "l4": (24, 96), "mi300x": (12, 224),
}  # fmt: skip


def known_shares(apps, schema_editor):
    GpuModel = apps.get_model("catalog", "GpuModel")
    for slug, (vcpus, gib) in KNOWN.items():
        GpuModel.objects.filter(slug=slug).update(vcpus_per_gpu=vcpus, ram_gib_per_gpu=gib)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0010_catalog_words_in_each_language"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpumodel",
            name="vcpus_per_gpu",
            field=models.PositiveSmallIntegerField(
                default=8,
                help_text="CPU time of this many CPUs with each GPU rented",
                verbose_name="vCPUs per GPU",
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="gpumodel",
            name="ram_gib_per_gpu",
            field=models.PositiveIntegerField(
                default=64,
                help_text="the host memory that comes with each GPU rented",
                verbose_name="RAM per GPU (GiB)",
            ),
            preserve_default=False,
        ),
        migrations.RunPython(known_shares, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="gpumodel",
            constraint=models.CheckConstraint(
                condition=models.Q(("ram_gib_per_gpu__gte", 1), ("vcpus_per_gpu__gte", 1)),
                name="catalog_gpumodel_host_share_positive",
            ),
        ),
    ]
