"""Telemetry's tables, indexes and constraints take telemetry's names; rows stay."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0004_enum_checks"),
        ("telemetry", "0001_initial"),
    ]

    operations = [
        # Renamed in place: rebuilding these unique indexes would rescan every rollup row.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER INDEX rentals_flag_one_open RENAME TO telemetry_flag_one_open;"
                    " ALTER TABLE rentals_gpurollup RENAME CONSTRAINT rentals_gpurollup_once"
                    " TO telemetry_gpurollup_once;",
                    "ALTER INDEX telemetry_flag_one_open RENAME TO rentals_flag_one_open;"
                    " ALTER TABLE rentals_gpurollup RENAME CONSTRAINT telemetry_gpurollup_once"
                    " TO rentals_gpurollup_once;",
                ),
            ],
            state_operations=[
                migrations.RemoveConstraint(model_name="flag", name="rentals_flag_one_open"),
                migrations.RemoveConstraint(model_name="gpurollup", name="rentals_gpurollup_once"),
                migrations.AddConstraint(
                    model_name="flag",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("closed_at__isnull", True)),
                        fields=("gpu", "kind"),
                        name="telemetry_flag_one_open",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="gpurollup",
                    constraint=models.UniqueConstraint(
                        fields=("gpu", "bucket", "at"), name="telemetry_gpurollup_once"
                    ),
                ),
            ],
        ),
        migrations.RenameIndex(
            model_name="gpurollup",
            new_name="telemetry_rollup_bucket_at",
            old_name="rentals_rollup_bucket_at",
        ),
        migrations.RenameIndex(
            model_name="gpusample",
            new_name="telemetry_sample_gpu_at",
            old_name="rentals_sample_gpu_at",
        ),
        migrations.RenameIndex(
            model_name="gpusample",
            new_name="telemetry_sample_at",
            old_name="rentals_sample_at",
        ),
        migrations.RenameIndex(
            model_name="poll",
            new_name="telemetry_poll_node_at",
            old_name="rentals_pol_node_id_07ce20_idx",
        ),
        migrations.AddConstraint(
            model_name="flag",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "kind__in",
                        ["stopped_active", "unallocated_active", "xid", "hot", "gpu_missing"],
                    )
                ),
                name="telemetry_flag_kind_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="gpurollup",
            constraint=models.CheckConstraint(
                condition=models.Q(("bucket__in", ["minute", "hour", "day"])),
                name="telemetry_gpurollup_bucket_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="poll",
            constraint=models.CheckConstraint(
                condition=models.Q(("outcome__in", ["ok", "degraded", "unreachable", "malformed"])),
                name="telemetry_poll_outcome_valid",
            ),
        ),
        migrations.AlterModelTable(
            name="flag",
            table=None,
        ),
        migrations.AlterModelTable(
            name="gpurollup",
            table=None,
        ),
        migrations.AlterModelTable(
            name="gpusample",
            table=None,
        ),
        migrations.AlterModelTable(
            name="poll",
            table=None,
        ),
    ]
