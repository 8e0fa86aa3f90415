"""Signing secrets are kept sealed (core.sealed), no longer in plain text."""

from django.db import migrations, models

from core.sealed import seal, unseal


def _seal(apps, schema_editor):
    endpoints = apps.get_model("webhooks", "WebhookEndpoint")
    for endpoint in endpoints.objects.only("pk", "secret"):
        endpoints.objects.filter(pk=endpoint.pk).update(secret_sealed=seal(endpoint.secret))


def _unseal(apps, schema_editor):
    endpoints = apps.get_model("webhooks", "WebhookEndpoint")
    for endpoint in endpoints.objects.only("pk", "secret_sealed"):
        endpoints.objects.filter(pk=endpoint.pk).update(secret=unseal(endpoint.secret_sealed))


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="webhookendpoint",
            name="secret_sealed",
            field=models.TextField(default="", editable=False),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="webhookendpoint",
            name="secret",
            field=models.CharField(default="", editable=False, max_length=100),
        ),
        migrations.RunPython(_seal, _unseal),
        migrations.RemoveField(model_name="webhookendpoint", name="secret"),
    ]
