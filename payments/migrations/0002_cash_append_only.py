"""The cash ledger is append-only: money that moved is never edited or deleted, whoever
asks (the ORM, raw SQL, the admin). A correction is a new row."""

from django.db import migrations

SQL = """
CREATE FUNCTION payments_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the cash ledger is append-only: % of % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;
CREATE TRIGGER payments_cashentry_append_only BEFORE UPDATE OR DELETE ON payments_cashentry
    FOR EACH ROW EXECUTE FUNCTION payments_refuse_change();
"""

REVERSE = """
DROP TRIGGER payments_cashentry_append_only ON payments_cashentry;
DROP FUNCTION payments_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [("payments", "0001_initial")]

    operations = [migrations.RunSQL(SQL, REVERSE)]
