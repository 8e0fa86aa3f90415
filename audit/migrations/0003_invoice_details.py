"""The team's buyer details in its audit rows, and an event when they change."""

import pgtrigger.compiler
from django.db import migrations, models

from audit.operations import AddTriggerTo, RemoveTriggerFrom


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_tracked_triggers"),
        ("accounts", "0012_team_buyer"),
    ]

    operations = [
        migrations.AddField(
            model_name="teamaudit",
            name="address",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        migrations.AddField(
            model_name="teamaudit",
            name="country",
            field=models.CharField(blank=True, db_default="", default="", max_length=2),
        ),
        migrations.AddField(
            model_name="teamaudit",
            name="legal_name",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="teamaudit",
            name="vat_id",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="Compact, with its country prefix in the EU (PL5260250274, DE136695976)",
                max_length=20,
            ),
        ),
        # The team's triggers, with the buyer columns (audit/operations.py: from here, not
        # from accounts' migrations).
        RemoveTriggerFrom(
            app_label="accounts",
            model_name="team",
            name="spend_limit_changed_update",
        ),
        RemoveTriggerFrom(
            app_label="accounts",
            model_name="team",
            name="second_factor_changed_update",
        ),
        AddTriggerTo(
            app_label="accounts",
            model_name="team",
            trigger=pgtrigger.compiler.Trigger(
                name="spend_limit_changed_update",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (OLD."monthly_spend_limit" IS DISTINCT FROM (NEW."monthly_spend_limit"))',
                    func='INSERT INTO "audit_teamaudit" ("address", "country", "legal_name", "monthly_spend_limit", "name", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "require_second_factor", "vat_id") VALUES (NEW."address", NEW."country", NEW."legal_name", NEW."monthly_spend_limit", NEW."name", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, clock_timestamp(), \'spend limit changed\', NEW."id", NEW."require_second_factor", NEW."vat_id"); RETURN NULL;',
                    hash="d58b99643ecc660a9582c9d662b4e581ce572604",
                    operation="UPDATE",
                    pgid="pgtrigger_spend_limit_changed_update_65523",
                    table="accounts_team",
                    when="AFTER",
                ),
            ),
        ),
        AddTriggerTo(
            app_label="accounts",
            model_name="team",
            trigger=pgtrigger.compiler.Trigger(
                name="second_factor_changed_update",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (OLD."require_second_factor" IS DISTINCT FROM (NEW."require_second_factor"))',
                    func='INSERT INTO "audit_teamaudit" ("address", "country", "legal_name", "monthly_spend_limit", "name", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "require_second_factor", "vat_id") VALUES (NEW."address", NEW."country", NEW."legal_name", NEW."monthly_spend_limit", NEW."name", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, clock_timestamp(), \'second factor changed\', NEW."id", NEW."require_second_factor", NEW."vat_id"); RETURN NULL;',
                    hash="3ee1d9c29bb74e2acac523513858fe1cb0c1f583",
                    operation="UPDATE",
                    pgid="pgtrigger_second_factor_changed_update_dd201",
                    table="accounts_team",
                    when="AFTER",
                ),
            ),
        ),
        AddTriggerTo(
            app_label="accounts",
            model_name="team",
            trigger=pgtrigger.compiler.Trigger(
                name="invoice_details_changed_update",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (OLD."address" IS DISTINCT FROM (NEW."address") OR OLD."country" IS DISTINCT FROM (NEW."country") OR OLD."legal_name" IS DISTINCT FROM (NEW."legal_name") OR OLD."vat_id" IS DISTINCT FROM (NEW."vat_id"))',
                    func='INSERT INTO "audit_teamaudit" ("address", "country", "legal_name", "monthly_spend_limit", "name", "pgh_context", "pgh_context_id", "pgh_created_at", "pgh_label", "pgh_obj_id", "require_second_factor", "vat_id") VALUES (NEW."address", NEW."country", NEW."legal_name", NEW."monthly_spend_limit", NEW."name", COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_metadata\', TRUE), \'\'), NULL)::JSONB, COALESCE(NULLIF(CURRENT_SETTING(\'pghistory.context_id\', TRUE), \'\'), NULL)::UUID, clock_timestamp(), \'invoice details changed\', NEW."id", NEW."require_second_factor", NEW."vat_id"); RETURN NULL;',
                    hash="062d4953bec0a51ccd0903f424e5cc6c7139562b",
                    operation="UPDATE",
                    pgid="pgtrigger_invoice_details_changed_update_21851",
                    table="accounts_team",
                    when="AFTER",
                ),
            ),
        ),
    ]
