"""Today's quotes, allocations, ledger rows and idempotency keys belong to their owner's
personal team (accounts 0007 made one for every user): nothing is lost, access is as before."""

from django.db import migrations

TABLES = ("rentals_quote", "rentals_allocation", "rentals_ledgerentry", "rentals_idempotencykey")

FILL = "\n".join(
    f"UPDATE {table} AS r SET team_id = t.id FROM accounts_team t "
    f"WHERE t.personal_for_id = r.user_id AND r.team_id IS NULL;"
    for table in TABLES
)


class Migration(migrations.Migration):
    dependencies = [
        ("rentals", "0007_team_ownership"),
        ("accounts", "0007_personal_teams"),
    ]

    operations = [migrations.RunSQL(FILL, migrations.RunSQL.noop)]
