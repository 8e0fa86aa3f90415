"""Amounts applied to invoices are append-only: a correction is a new row (a negative one on
the credit note), never an edit, so an invoice's payment status can always be retraced."""

from django.db import migrations

SQL = """
CREATE TRIGGER invoices_invoicepayment_append_only
    BEFORE UPDATE OR DELETE ON invoices_invoicepayment
    FOR EACH ROW EXECUTE FUNCTION invoices_refuse_change();
"""

REVERSE = "DROP TRIGGER invoices_invoicepayment_append_only ON invoices_invoicepayment;"


class Migration(migrations.Migration):
    dependencies = [("invoices", "0004_payments")]

    operations = [migrations.RunSQL(SQL, REVERSE)]
