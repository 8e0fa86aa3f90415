"""Database guards for the paid period and the allocation state machine.

Stop and start may never move the paid period, whichever path writes the row (API, page,
admin, task, raw SQL). Only an extension lengthens `paid_until`, and it never changes the
state in the same statement.
"""

from django.db import migrations

GUARD = """
CREATE OR REPLACE FUNCTION rentals_allocation_guard() RETURNS trigger AS $$
BEGIN
    IF NEW.paid_from IS DISTINCT FROM OLD.paid_from THEN
        RAISE EXCEPTION 'paid_from of allocation % never changes', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rentals_allocation_paid_from_fixed';
    END IF;
    IF NEW.paid_until < OLD.paid_until THEN
        RAISE EXCEPTION 'paid_until of allocation % never moves earlier', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rentals_allocation_paid_until_grows';
    END IF;
    IF NEW.paid_until <> OLD.paid_until AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'a state change never moves paid_until (allocation %)', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rentals_allocation_paid_until_grows';
    END IF;
    IF NEW.paid_until <> OLD.paid_until AND OLD.state NOT IN ('scheduled', 'running', 'stopped') THEN
        RAISE EXCEPTION 'an ended allocation cannot be extended (allocation %)', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rentals_allocation_paid_until_grows';
    END IF;
    IF NEW.state <> OLD.state AND NOT (
        (OLD.state = 'scheduled' AND NEW.state IN ('running', 'cancelled', 'expired'))
        OR (OLD.state = 'running' AND NEW.state IN ('stopped', 'expired'))
        OR (OLD.state = 'stopped' AND NEW.state IN ('running', 'expired'))
    ) THEN
        RAISE EXCEPTION 'allocation % cannot go from % to %', OLD.id, OLD.state, NEW.state
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rentals_allocation_state_machine';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER rentals_allocation_guard
    BEFORE UPDATE ON rentals_allocation
    FOR EACH ROW EXECUTE FUNCTION rentals_allocation_guard();
"""

UNGUARD = """
DROP TRIGGER IF EXISTS rentals_allocation_guard ON rentals_allocation;
DROP FUNCTION IF EXISTS rentals_allocation_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("rentals", "0001_initial")]

    operations = [migrations.RunSQL(GUARD, UNGUARD)]
