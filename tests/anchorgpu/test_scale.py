"""The scale generator: the world it writes holds together under every constraint
the database enforces, at a size a test can afford; the benchmark writes the big ones."""

import pytest

from accounts.models import BillingMode, Team
from anchorgpu.scale import CUSTOMER, fleet_gpu_identity, generate_scale
from catalog.models import Gpu
from rentals.models import Allocation, LedgerEntry
from reports.models import AllocatedStep, LedgerDay
from reports.selectors import fleet_report


def test_generated_gpus_have_distinct_identities_at_100k():
    """A serial from a hash of host and index collided among 100k GPUs' MI300Xs (COPY
    catalog_gpu: duplicate key "catalog_gpu_uuid_key")."""
    identities = [
        fleet_gpu_identity(gpu_id, f"node-{gpu_id // 8:06d}", gpu_id % 8, vendor)
        for gpu_id in range(1, 100_001)
        for vendor in ("amd", "nvidia")
    ]
    assert len(set(identities)) == len(identities)
    amd = fleet_gpu_identity(97_723, "mi300x-eu-012215", 3, "amd")
    assert len(amd) == 12 and amd.startswith("6924") and amd.isdigit()


@pytest.mark.django_db
def test_a_small_generated_year_is_written_whole(settings):
    # a sign-up pays by card here: the generated customer, with its invoiced history, does not
    settings.ANCHORGPU = {**settings.ANCHORGPU, "NEW_TEAM_BILLING_MODE": "card"}
    generated = generate_scale(gpus=120, days=20, hourly_days=1, raw_hours=0.25,
                               log=lambda line: None)  # fmt: skip
    rows = generated["rows"]
    assert rows["catalog_gpu"] == Gpu.objects.count() == 120
    allocations = Allocation.objects.count()
    assert rows["rentals_allocation"] == allocations > 0
    # the benchmark's customer holds 2,000 of them, or all where there are fewer
    assert Allocation.objects.filter(user_id=generated["customer"]).count() == min(
        2000, allocations
    )
    assert LedgerEntry.objects.filter(team__personal_for__username=CUSTOMER).count() == 50_000
    assert set(Team.objects.values_list("billing_mode", flat=True)) == {BillingMode.INVOICED}
    assert rows["fleet minutes"] > 0  # the rollup ran once over the raw samples


@pytest.mark.django_db
def test_a_generated_world_replaces_the_dashboards_closed_steps_of_the_one_before():
    """The closed steps are derived from the holdings and the ledger: a reset that kept the
    last world's would show its figures on the new one."""
    generate_scale(gpus=60, days=10, hourly_days=1, raw_hours=0.25, log=lambda line: None)
    generated = generate_scale(gpus=120, days=10, hourly_days=1, raw_hours=0.25, reset=True,
                               log=lambda line: None)  # fmt: skip
    now = generated["now"]
    assert AllocatedStep.objects.exists() and LedgerDay.objects.exists()
    kept = [fleet_report(days=days, now=now) for days in (7, 30)]
    AllocatedStep.objects.all().delete()
    counted = [fleet_report(days=days, now=now) for days in (7, 30)]
    for one, other in zip(kept, counted, strict=True):
        assert one["over_time"] == other["over_time"] and one["revenue"] == other["revenue"]
    assert any(p["allocated"] for p in kept[1]["over_time"][:-1])
