"""An issued invoice, credit note or line never changes: the database refuses UPDATE and
DELETE of them, whoever asks (the ORM, raw SQL, the admin). What happens to a document
later (KSeF) lives in invoices_ksefsubmission, which may change. TRUNCATE is left alone:
it is how a test database is emptied between tests, never a path of the product."""

from django.db import migrations

SQL = """
CREATE FUNCTION invoices_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an issued % is immutable: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;
CREATE TRIGGER invoices_invoice_immutable BEFORE UPDATE OR DELETE ON invoices_invoice
    FOR EACH ROW EXECUTE FUNCTION invoices_refuse_change();
CREATE TRIGGER invoices_invoiceline_immutable BEFORE UPDATE OR DELETE ON invoices_invoiceline
    FOR EACH ROW EXECUTE FUNCTION invoices_refuse_change();
"""

REVERSE = """
DROP TRIGGER invoices_invoiceline_immutable ON invoices_invoiceline;
DROP TRIGGER invoices_invoice_immutable ON invoices_invoice;
DROP FUNCTION invoices_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [("invoices", "0001_initial")]

    operations = [migrations.RunSQL(SQL, REVERSE)]
