"""Demo rentals on top of the demo catalog (catalog/demo.py)."""

import math
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone

from accounts.models import BillingMode, SshKey, Team
from accounts.roles import acting_as, personal_team
from accounts.services.ssh_keys import ssh_key_add
from catalog.models import Gpu, NodeState
from core.errors import DomainError
from rentals.models import Allocation, Notice
from rentals.services import allocation_book, allocations_enforce, quote_create
from telemetry.models import FleetSize, GpuHour
from telemetry.rollup import fleet_rollups_refresh, hours_copy


def seed_demo_keys(folder: Path) -> list[Path]:
    """An SSH key for each demo customer, its private half under `folder` (made once), so
    the demo's ssh commands work as printed: `ssh -i .data/demo-keys/alice …`."""
    made = []
    folder.mkdir(parents=True, exist_ok=True)
    for username in ("alice", "bob"):
        user = get_user_model().objects.get(username=username)
        private = folder / username
        if not private.exists():
            key = ed25519.Ed25519PrivateKey.generate()
            private.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.OpenSSH,
                    serialization.NoEncryption(),
                )
            )
            private.chmod(0o600)
            public = key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
            private.with_suffix(".pub").write_text(f"{public.decode()} {username}@demo\n")
        line = private.with_suffix(".pub").read_text()
        if not SshKey.objects.filter(user=user, name="demo key").exists():
            ssh_key_add(user=user, name="demo key", public_key=line)
        made.append(private)
    return made


# Invoices name a buyer: alice buys for a Polish company (domestic VAT), bob for a German
# one (reverse charge); the other demo users are consumers.
DEMO_BUYERS = {
    "alice": {
        "legal_name": "Alice Lab sp. z o.o.", "address": "ul. Prosta 20\n00-850 Warszawa",
        "country": "PL", "vat_id": "PL7740001454",
    },
    "bob": {
        "legal_name": "Bob Compute GmbH", "address": "Hauptstraße 5\n10115 Berlin",
        "country": "DE", "vat_id": "DE136695976",
    },
}  # fmt: skip


def seed_rentals() -> None:
    """Give alice something to look at: one running allocation and one scheduled; and the
    demo companies' invoice details, before anything is quoted."""
    User = get_user_model()
    for user in User.objects.filter(username__in=DEMO_BUYERS):
        Team.objects.filter(pk=personal_team(user).pk, legal_name="").update(
            **DEMO_BUYERS[user.username]
        )
        # The demo's history is booked invoiced (the first seeding); `seed_payments` then
        # makes alice's team a card team with a saved test card.
        if not Allocation.objects.filter(user=user).exists():
            Team.objects.filter(pk=personal_team(user).pk).update(billing_mode=BillingMode.INVOICED)
    alice = User.objects.get(username="alice")
    if Allocation.objects.filter(user=alice).exists():
        return
    now = timezone.now()
    running = quote_create(
        acting=acting_as(alice), gpu_model="h100-sxm", gpu_count=4, period="week", period_count=1,
        options=[{"option": "nvme-scratch", "quantity": 2}],
    )  # fmt: skip
    allocation_book(acting=acting_as(alice), quote=running)
    scheduled = quote_create(
        acting=acting_as(alice), gpu_model="l40s", gpu_count=2, period="day", period_count=3,
        starts_at=now + timedelta(days=2),
    )  # fmt: skip
    allocation_book(acting=acting_as(alice), quote=scheduled)


# (days ago it started, hours of the day it started, user, model, GPUs, period, periods,
#  how busy its GPUs were: 0 idle … 1 flat out)
HISTORY = [
    (29, 9, "alice", "h100-sxm", 8, "week", 1, 0.85), (28, 14, "bob", "a100-80gb", 4, "day", 3, 0.6),
    (27, 8, "bob", "l4", 2, "day", 2, 0.4), (26, 10, "alice", "h200", 8, "day", 2, 0.9),
    (24, 16, "bob", "mi300x", 8, "week", 1, 0.7), (23, 9, "alice", "l40s", 2, "day", 1, 0.05),
    (21, 11, "bob", "h100-sxm", 4, "week", 1, 0.75), (20, 13, "alice", "a100-80gb", 8, "day", 4, 0.8),
    (18, 8, "alice", "h200", 4, "week", 1, 0.65), (17, 15, "bob", "l4", 4, "day", 2, 0.3),
    (15, 9, "bob", "h200", 8, "day", 3, 0.95), (14, 10, "alice", "mi300x", 4, "day", 2, 0.5),
    (12, 12, "alice", "h100-sxm", 8, "day", 5, 0.88), (11, 9, "bob", "a100-80gb", 8, "week", 1, 0.7),
    (9, 14, "bob", "l40s", 4, "day", 2, 0.02), (8, 8, "alice", "h200", 8, "day", 3, 0.9),
    (6, 10, "bob", "mi300x", 8, "day", 4, 0.6), (5, 9, "alice", "l4", 2, "day", 2, 0.45),
    (4, 13, "bob", "h100-sxm", 8, "week", 1, 0.8), (3, 9, "alice", "a100-80gb", 4, "week", 1, 0.03),
    (2, 11, "bob", "h200", 4, "week", 1, 0.7),
]  # fmt: skip


def seed_history(*, days: int = 30, now=None) -> bool:
    """A believable past for a new demo: bookings over the last 30 days (their charges,
    receipts, the ended ones expired), GPU hours (and the days and fleet rollups from them)
    that follow what
    was rented (busy by day, quieter at night, idle when free) and the fleet's size per
    hour. Runs once, on a database with no history yet; demo mode only. (The fleet report's
    closed steps are forgotten by `reports.demo.seed_history`, which calls this.)"""
    now = now or timezone.now()
    if GpuHour.objects.exists() or FleetSize.objects.exists():
        return False
    User = get_user_model()
    users = {u.username: u for u in User.objects.filter(username__in=["alice", "bob"])}
    hour = timedelta(hours=1)
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    start = this_hour - timedelta(days=days)
    busy_of: dict[tuple[int, datetime], float] = {}
    booked = []
    for ago, at_hour, username, model, count, period, periods, busy in HISTORY:
        booked_at = (this_hour - timedelta(days=ago)).replace(hour=at_hour)
        acting = acting_as(users[username])
        try:
            quote = quote_create(
                acting=acting, gpu_model=model, gpu_count=count, period=period,
                period_count=periods, now=booked_at,
            )  # fmt: skip
            allocation = allocation_book(acting=acting, quote=quote, now=booked_at)
        except DomainError:
            continue  # that model was full then: history does not need every row
        booked.append(allocation)
        for held in allocation.held.all():
            h = allocation.paid_from
            while h < min(allocation.paid_until, this_hour):
                busy_of[(held.gpu_id, h)] = busy
                h += hour
    # The ended ones expire when they ended, as the beat would have done; their receipts
    # were read and mailed back then.
    for ended in sorted({a.paid_until for a in booked if a.paid_until <= now}):
        allocations_enforce(now=ended)
    Notice.objects.filter(allocation__in=booked).update(
        read_at=F("created_at"), sent_at=F("created_at")
    )
    _hours_backfill(start=start, end=this_hour, busy_of=busy_of)
    fleet_rollups_refresh()  # the GPU days and the fleet's hours and days from the hours
    gpus = Gpu.objects.filter(node__state=NodeState.ACTIVE).count()
    FleetSize.objects.bulk_create(  # every GPU answered: each has its rollups above
        FleetSize(at=start + i * hour, gpus=gpus, reporting=gpus) for i in range(days * 24)
    )
    return True


def _hours_backfill(*, start, end, busy_of) -> None:
    """GPU hours for every GPU from `start` to `end`, as the rollup job would have written
    them from 15-second samples (written with COPY: 80,000 rows for 30 days of the demo
    fleet)."""
    rng = random.Random(20261130)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    gpus = list(Gpu.objects.select_related("node__gpu_model"))
    hours: list[tuple[Any, ...]] = []  # gpu_id, at and telemetry.sql.FIGURES in order
    h = start
    while h < end:
        for gpu in gpus:
            share = busy_of.get((gpu.pk, h))
            total = gpu.node.gpu_model.memory_reported_mib
            if share is None:
                util = rng.uniform(0, 2)
                memory = 0.0
            else:
                daytime = 0.75 + 0.25 * math.sin((h.hour - 6) / 24 * math.tau)
                util = max(0.0, min(100.0, share * 100 * daytime + rng.uniform(-6, 6)))
                memory = total * min(0.95, 0.3 + share * 0.6)
            power = 60 + util * 5.5
            hours.append((
                gpu.pk, h, 240, util * 240, 240, min(100.0, util * 1.15 + 2), memory, total,
                power * 240, 240, 32 + util * 0.45, power * 3600, 3600.0,
                3600.0 if util > threshold else 0.0,
            ))  # fmt: skip
        h += timedelta(hours=1)
    hours_copy("telemetry_gpuhour", hours)
