"""Every token now has an expiry (0003 gave the old ones theirs). A migration of its own: the
backfill's pending FK trigger events forbid altering the table in the same transaction."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("accounts", "0003_token_expiry_and_password_stamp")]

    operations = [
        migrations.AlterField(
            model_name="apitoken", name="expires_at", field=models.DateTimeField()
        ),
        migrations.AddIndex(
            model_name="apitoken",
            index=models.Index(fields=["user", "revoked_at"], name="accounts_token_user_live"),
        ),
    ]
