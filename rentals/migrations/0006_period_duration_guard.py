"""A rental period that any quote uses keeps its duration: the length is part of a contract.

The guard reads rentals' quotes, so rentals owns it (it was catalog's before: catalog 0003
created `catalog_rentalperiod_duration_guard`, which this drops where it exists).
"""

from django.db import migrations

GUARD = """
DROP TRIGGER IF EXISTS catalog_rentalperiod_duration_guard ON catalog_rentalperiod;
DROP FUNCTION IF EXISTS catalog_rentalperiod_duration_guard();

CREATE OR REPLACE FUNCTION rentals_period_in_use_guard() RETURNS trigger AS $$
BEGIN
    IF NEW.duration <> OLD.duration
       AND EXISTS (SELECT 1 FROM rentals_quote WHERE period_id = OLD.id) THEN
        RAISE EXCEPTION 'rental period % is used by quotes; its duration cannot change', OLD.slug
            USING ERRCODE = 'check_violation', CONSTRAINT = 'catalog_rentalperiod_duration_fixed';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER rentals_period_in_use_guard
    BEFORE UPDATE ON catalog_rentalperiod
    FOR EACH ROW EXECUTE FUNCTION rentals_period_in_use_guard();
"""

UNGUARD = """
DROP TRIGGER IF EXISTS rentals_period_in_use_guard ON catalog_rentalperiod;
DROP FUNCTION IF EXISTS rentals_period_in_use_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("rentals", "0005_enums_notices_idempotent_responses")]

    operations = [migrations.RunSQL(GUARD, UNGUARD)]
