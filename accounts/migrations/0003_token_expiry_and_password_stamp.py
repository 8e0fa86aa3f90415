"""Tokens expire and die with the password they were issued under.

Existing tokens get 90 days from their creation and the stamp of their owner's current
password (the same HMAC Django's get_session_auth_hash computes), so they keep working until
the owner changes the password.
"""

from django.conf import settings
from django.db import migrations, models
from django.utils.crypto import salted_hmac


def stamp_existing_tokens(apps, schema_editor):
    """AbstractBaseUser.get_session_auth_hash, which historical models do not have."""
    tokens = apps.get_model("accounts", "ApiToken")
    for token in tokens.objects.select_related("user"):
        token.password_stamp = salted_hmac(
            "django.contrib.auth.models.AbstractBaseUser.get_session_auth_hash",
            token.user.password,
            algorithm="sha256",
        ).hexdigest()
        token.save(update_fields=["password_stamp"])


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_apitoken_table"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="password_stamp",
            field=models.CharField(default="", max_length=128),
            preserve_default=False,
        ),
        migrations.RunSQL(
            "UPDATE accounts_apitoken SET expires_at = created_at + interval '90 days'",
            migrations.RunSQL.noop,
        ),
        migrations.RunPython(stamp_existing_tokens, migrations.RunPython.noop),
    ]
