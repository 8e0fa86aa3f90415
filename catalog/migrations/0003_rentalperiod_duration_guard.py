"""A rental period that any quote uses keeps its duration: the length is part of a contract."""

from django.db import migrations

GUARD = """
CREATE OR REPLACE FUNCTION catalog_rentalperiod_duration_guard() RETURNS trigger AS $$
BEGIN
    IF NEW.duration <> OLD.duration
       AND EXISTS (SELECT 1 FROM rentals_quote WHERE period_id = OLD.id) THEN
        RAISE EXCEPTION 'rental period % is used by quotes; its duration cannot change', OLD.slug
            USING ERRCODE = 'check_violation', CONSTRAINT = 'catalog_rentalperiod_duration_fixed';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER catalog_rentalperiod_duration_guard
    BEFORE UPDATE ON catalog_rentalperiod
    FOR EACH ROW EXECUTE FUNCTION catalog_rentalperiod_duration_guard();
"""

UNGUARD = """
DROP TRIGGER IF EXISTS catalog_rentalperiod_duration_guard ON catalog_rentalperiod;
DROP FUNCTION IF EXISTS catalog_rentalperiod_duration_guard();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0002_node_telemetry_url_internal_hosts"),
        ("rentals", "0002_allocation_guards"),
    ]

    operations = [migrations.RunSQL(GUARD, UNGUARD)]
