"""Quote lines and ledger rows keep facts, not sentences in their creator's language; money
columns take each currency's own decimals (up to 4)."""

import re

from django.db import migrations, models

import core.money


def facts_from_sentences(apps, schema_editor):
    QuoteLine = apps.get_model("rentals", "QuoteLine")
    LedgerEntry = apps.get_model("rentals", "LedgerEntry")
    for line in QuoteLine.objects.select_related("quote", "option"):
        if line.kind == "gpu":
            line.count, line.periods = line.quote.gpu_count, line.quote.period_count
        elif line.option.billing == "per_period":
            line.periods = line.quote.period_count
            line.count = line.quantity // line.periods
        else:
            line.count, line.periods = line.quantity, None
        line.save(update_fields=["count", "periods"])
    for entry in LedgerEntry.objects.select_related("allocation__quote"):
        if entry.kind == "refund":
            entry.reason, entry.period_count = "cancellation", None
        elif entry.description.startswith(("Extension", "Przedłużenie")):
            found = re.search(r"(\d+)", entry.description)
            entry.reason, entry.period_count = "extension", int(found.group(1)) if found else 1
        else:
            entry.reason = "booking"
            entry.period_count = entry.allocation.quote.period_count
        entry.save(update_fields=["reason", "period_count"])


MONEY = dict(decimal_places=4, max_digits=18)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0006_money_four_places"),
        ("rentals", "0011_extension_quotes"),
    ]

    operations = [
        migrations.AlterField("quote", "total", core.money.MoneyField(**MONEY)),
        migrations.AlterField("quoteline", "unit_price", core.money.MoneyField(**MONEY)),
        migrations.AlterField("quoteline", "amount", core.money.MoneyField(**MONEY)),
        migrations.AlterField("ledgerentry", "amount", core.money.MoneyField(**MONEY)),
        migrations.AddField(
            "quoteline",
            "count",
            models.PositiveIntegerField(null=True, help_text="GPUs, or units of the option"),
        ),
        migrations.AddField(
            "quoteline",
            "periods",
            models.PositiveSmallIntegerField(
                blank=True,
                null=True,
                help_text="rental periods charged; empty for a one-time option",
            ),
        ),
        migrations.AddField(
            "ledgerentry",
            "reason",
            models.CharField(
                max_length=12,
                null=True,
                choices=[
                    ("booking", "booking"),
                    ("extension", "extension"),
                    ("cancellation", "cancellation"),
                ],
            ),
        ),
        migrations.AddField(
            "ledgerentry",
            "period_count",
            models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(facts_from_sentences, migrations.RunPython.noop),
    ]
