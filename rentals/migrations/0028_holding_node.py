# A holding names its GPU's node, kept by the database: "GPUs held now per node" (the
# catalog's free GPUs, /metrics) is then one pass over the live holdings' index, with no
# join on every GPU row (at 100k GPUs: a hash of 100,000 GPUs per read). The node is set
# from the GPU before every insert, whatever the writer passed (the booking's statement,
# swaps and maintenance pass none), and rewritten on every holding of a GPU that moves.

import django.db.models.deletion
from django.db import migrations, models

KEEP = """
CREATE FUNCTION rentals_allocationgpu_node() RETURNS trigger AS $$
BEGIN
    NEW.node_id := (SELECT node_id FROM catalog_gpu WHERE id = NEW.gpu_id);
    RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER rentals_allocationgpu_node BEFORE INSERT OR UPDATE OF gpu_id, node_id
    ON rentals_allocationgpu FOR EACH ROW EXECUTE FUNCTION rentals_allocationgpu_node();

CREATE FUNCTION catalog_gpu_moves_holdings() RETURNS trigger AS $$
BEGIN
    UPDATE rentals_allocationgpu SET node_id = NEW.node_id WHERE gpu_id = NEW.id;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER catalog_gpu_moves_holdings AFTER UPDATE OF node_id ON catalog_gpu
    FOR EACH ROW WHEN (OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION catalog_gpu_moves_holdings();

UPDATE rentals_allocationgpu ag SET node_id = g.node_id FROM catalog_gpu g WHERE g.id = ag.gpu_id;
-- the foreign keys checked now, not at commit: the table is altered below
SET CONSTRAINTS ALL IMMEDIATE;
"""

UNKEEP = """
DROP TRIGGER catalog_gpu_moves_holdings ON catalog_gpu;
DROP FUNCTION catalog_gpu_moves_holdings();
DROP TRIGGER rentals_allocationgpu_node ON rentals_allocationgpu;
DROP FUNCTION rentals_allocationgpu_node();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0010_catalog_words_in_each_language"),
        ("rentals", "0027_allocation_impaired"),
    ]

    operations = [
        migrations.AddField(
            model_name="allocationgpu",
            name="node",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="catalog.node",
            ),
        ),
        migrations.RunSQL(KEEP, UNKEEP),
        migrations.AlterField(
            model_name="allocationgpu",
            name="node",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="catalog.node",
            ),
        ),
        migrations.RemoveIndex(model_name="allocationgpu", name="rentals_ag_live_ends"),
        migrations.AddIndex(
            model_name="allocationgpu",
            index=models.Index(
                condition=models.Q(("released", False)),
                fields=["ends_at"],
                include=("gpu", "starts_at", "allocation", "node"),
                name="rentals_ag_live_ends",
            ),
        ),
    ]
