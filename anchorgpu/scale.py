"""A provider's year at scale, generated: `manage.py generate_scale`.

Deterministic for a seed (the same rows, at the same offsets from the database's clock),
written with binary COPY, every constraint and trigger in force: the exclusion on held GPUs
holds because each node's GPUs are split into fixed lanes, and each lane's allocations
follow one another in time; a cancelled booking releases its holdings and its time.

What is generated:
- the demo catalog (models, periods, prices, options) and five regions; a fleet of N GPUs
  on 8-GPU nodes (4-GPU for L40S and L4), NVIDIA and AMD, a third of the large nodes in
  InfiniBand network groups, some in blocks that are booked whole as clusters;
- N / 30 teams of 1–6 members (one password hash computed once and shared: never one
  PBKDF2 per user), and one customer, `scale-customer`, whose personal team holds 2,000
  allocations and a 50,000-row ledger (padded with one-period extension charges where its
  allocations have fewer: the statement's figure needs that many rows at every size);
- `days` of allocations ending up to 30 days ahead: day, week and month periods, extensions,
  cancellations before the start (refunded), stops and starts, clusters; their quotes and
  lines, holdings, events, ledger rows and notices (receipts, expiry warnings);
- GPU days for every day, GPU hours for the last `hourly_days` (each month in its
  partition), fleet rollups (hour and day) and fleet sizes for every hour, raw samples and
  polls for the last `raw_hours`, open and closed flags. With `minutes_rolled` (the
  default) the rollup task then runs once, as beat runs it every minute: the fleet's minutes
  up to the last complete minute and the GPU hours that closed, so the deployment looks like one
  whose rollup ran every minute; without it the raw samples wait for the next rollup (what
  the hourly rollup's benchmark measures). The dashboard's closed hours and days are then
  written as their task writes them every minute.

The per-GPU hours of a whole year (876 million rows at 100k GPUs) and a whole day of raw
samples do not fit this machine: docs/operations.md extrapolates them from the measured
bytes per row.
"""

import math
import random
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection, transaction
from django.db.models import Max

from accounts.models import BillingMode, Role, Team
from accounts.roles import personal_team
from anchorgpu import sql
from catalog.demo import HOST_SHARE, gpu_identity, seed_catalog
from catalog.models import GpuModel, GpuPrice, Node, Region, RentalPeriod
from core.db import db_now
from core.vat import rate_for, treatment_for, vat_split
from rentals.models import (
    AllocationState,
    EventKind,
    LedgerKind,
    LedgerReason,
    NoticeKind,
    QuoteKind,
    QuoteLineKind,
)
from rentals.services.summary import capacity_changed
from reports.services import allocated_steps_close
from telemetry.models import SEVERITY as FLAG_SEVERITY
from telemetry.models import FlagKind, PollOutcome, RollupBucket
from telemetry.partitions import (
    MONTHLY,
    month_partition_create,
    month_partitions_ensure,
    sample_partitions_ensure,
)
from telemetry.rollup import telemetry_rollup
from telemetry.sql import copy_binary

CUSTOMER = "scale-customer"
STAFF = "scale-staff"
CUSTOMER_ALLOCATIONS = 2000
CUSTOMER_LEDGER_ROWS = 50_000

EXTRA_REGIONS = [("fi-hel", ("Helsinki", "Helsinki")), ("us-west", ("Oregon", "Oregon"))]
# model slug, share of the fleet's GPUs, GPUs per node, may sit in a network group
FLEET_MIX = [
    ("h100-sxm", 0.34, 8, True), ("h200", 0.20, 8, True), ("a100-80gb", 0.14, 8, True),
    ("mi300x", 0.16, 8, True), ("l40s", 0.10, 4, False), ("l4", 0.06, 4, False),
]  # fmt: skip
# How a node's GPUs are split into lanes (each lane one allocation at a time).
LANES = {8: [((8,), 4), ((4, 4), 3), ((4, 2, 2), 2), ((2, 2, 2, 2), 1), ((1,) * 8, 1)],
         4: [((4,), 3), ((2, 2), 2), ((1, 1, 1, 1), 1)]}  # fmt: skip
# period slug, weight, most periods booked
PERIOD_MIX = [("day", 40, 7), ("week", 35, 4), ("month", 25, 3)]
CLUSTER_BLOCK = 4  # nodes per block booked whole as a cluster
MEAN_GAP_DAYS = 5.0  # idle time between a lane's allocations
CANCEL_SHARE = 0.05  # of bookings made ahead of their start
STOP_SHARE = 0.12
EXTEND_SHARE = 0.30
AHEAD = timedelta(days=30)

U = "uuid"
T = "timestamptz"
COLUMNS = {
    "auth_user": (("id", "int4"), ("password", "text"), ("last_login", T),
                  ("is_superuser", "bool"), ("username", "text"), ("first_name", "text"),
                  ("last_name", "text"), ("email", "text"), ("is_staff", "bool"),
                  ("is_active", "bool"), ("date_joined", T)),
    "accounts_team": (("id", "int8"), ("name", "text"), ("personal_for_id", "int4"),
                      ("created_at", T), ("monthly_spend_limit", "numeric"),
                      ("require_second_factor", "bool"), ("legal_name", "text"),
                      ("address", "text"), ("country", "text"), ("vat_id", "text")),
    "accounts_membership": (("team_id", "int8"), ("user_id", "int4"), ("role", "text"),
                            ("joined_at", T)),
    "catalog_node": (("id", "int8"), ("hostname", "text"), ("region_id", "int8"),
                     ("gpu_model_id", "int8"), ("telemetry_url", "text"), ("exporter", "text"),
                     ("metric_prefix", "text"), ("state", "text"), ("health", "text"),
                     ("fabric", "text"), ("network_group", "text"), ("health_detail", "text"),
                     ("last_poll_at", T), ("last_good_poll_at", T), ("ssh_host", "text"),
                     ("ssh_port", "int4")),
    "catalog_gpu": (("id", "int8"), ("node_id", "int8"), ("index", "int2"), ("uuid", "text")),
    "rentals_quote": (("id", U), ("team_id", "int8"), ("user_id", "int4"),
                      ("gpu_model_id", "int8"), ("gpu_count", "int2"), ("node_count", "int2"),
                      ("period_id", "int8"), ("period_count", "int2"), ("region_id", "int8"),
                      ("paid_from", T), ("paid_until", T), ("starts_now", "bool"),
                      ("total", "numeric"), ("currency", "text"), ("created_at", T),
                      ("valid_until", T), ("kind", "text"), ("extends_id", U), ("used_at", T),
                      ("tax_treatment", "text"), ("vat_rate", "numeric"), ("net_total", "numeric"),
                      ("vat_total", "numeric"), ("vcpus_per_gpu", "int2"),
                      ("ram_gib_per_gpu", "int4")),
    "rentals_quoteline": (("quote_id", U), ("position", "int2"), ("kind", "text"),
                          ("option_id", "int8"), ("count", "int4"), ("periods", "int2"),
                          ("quantity", "int4"), ("unit_price", "numeric"), ("amount", "numeric"),
                          ("vat", "numeric")),
    "rentals_cluster": (("id", U), ("team_id", "int8"), ("user_id", "int4"), ("quote_id", U),
                        ("gpu_model_id", "int8"), ("node_count", "int2"),
                        ("network_group", "text"), ("created_at", T)),
    "rentals_allocation": (("id", U), ("team_id", "int8"), ("user_id", "int4"), ("quote_id", U),
                           ("cluster_id", U), ("gpu_model_id", "int8"), ("node_id", "int8"),
                           ("gpu_count", "int2"), ("period_id", "int8"), ("paid_from", T),
                           ("paid_until", T), ("state", "text"), ("created_at", T),
                           ("warned_24h_at", T), ("warned_1h_at", T), ("impaired_since", T),
                           ("vcpus_per_gpu", "int2"), ("ram_gib_per_gpu", "int4")),
    "rentals_allocationgpu": (("allocation_id", U), ("gpu_id", "int8"), ("starts_at", T),
                              ("ends_at", T), ("released", "bool")),
    "rentals_allocationevent": (("allocation_id", U), ("at", T), ("actor_id", "int4"),
                                ("kind", "text"), ("from_state", "text"), ("to_state", "text"),
                                ("note", "text")),
    "rentals_ledgerentry": (("team_id", "int8"), ("user_id", "int4"), ("allocation_id", U),
                            ("kind", "text"), ("amount", "numeric"), ("currency", "text"),
                            ("reason", "text"), ("period_count", "int2"), ("at", T),
                            ("net", "numeric"), ("vat", "numeric"), ("quote_id", U),
                            ("period_id", "int8")),
    "rentals_notice": (("user_id", "int4"), ("allocation_id", U), ("endpoint_url", "text"),
                       ("kind", "text"), ("ends_at", T), ("created_at", T), ("sent_at", T),
                       ("attempts", "int2"), ("last_error", "text"), ("read_at", T),
                       ("quote_id", U)),
    "telemetry_flag": (("node_id", "int8"), ("gpu_id", "int8"), ("kind", "text"),
                       ("severity", "text"), ("detail", "text"), ("code", "int4"),
                       ("opened_at", T), ("last_seen_at", T), ("closed_at", T), ("note", "text")),
}  # fmt: skip


def _copy(cursor, table: str, rows) -> int:
    """One binary COPY of `rows` (tuples in COLUMNS[table]'s order) into `table`."""
    names, types = zip(*COLUMNS[table], strict=True)
    count = 0
    with cursor.copy(copy_binary(table, names)) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def fleet_gpu_identity(gpu_id: int, hostname: str, index: int, vendor: str) -> str:
    """A generated GPU's UUID (NVIDIA) or serial (AMD), unique in the fleet as the database
    requires. NVIDIA's is the demo's (catalog.demo.gpu_identity, a UUID from the host and
    index). An AMD serial is twelve digits, "6924" and eight more: the demo's eight from a
    hash collide among the ~16,000 MI300Xs of 100k GPUs (the birthday bound of 10^8 is
    10^4), so here they are the GPU's id."""
    if vendor == "amd":
        return f"6924{gpu_id:08d}"
    return gpu_identity(hostname, index, vendor)


class _World:
    """The rows being generated, table by table, and the ids handed out."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.rows: dict[str, list[tuple]] = {table: [] for table in COLUMNS}

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def add(self, table: str, *row) -> None:
        self.rows[table].append(row)


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _catalog():
    """The demo catalog without its demo fleet, five regions, and the prices in force."""
    seed_catalog()
    Node.objects.all().delete()
    for slug, (english, polish) in EXTRA_REGIONS:
        Region.objects.update_or_create(slug=slug, defaults={"name_en": english, "name_pl": polish})
    periods = {p.slug: p for p in RentalPeriod.objects.all()}
    prices = {}
    for price in GpuPrice.objects.order_by("effective_from"):
        prices[(price.gpu_model.slug, price.period.slug)] = price
    return periods, prices, list(Region.objects.order_by("slug"))


def _fleet(world, gpus, regions, models, now):
    """Nodes and GPUs until `gpus` are placed; each node's lanes and its cluster block."""
    rng = world.rng
    nodes, gpu_id, node_id = [], 0, 0
    grouped_count, block_count = (
        {},
        {},
    )  # per (region, model): grouped nodes; per group: cluster nodes
    weights = [share for _, share, _, _ in FLEET_MIX]
    while gpu_id < gpus:
        slug, _, per_node, groupable = rng.choices(FLEET_MIX, weights)[0]
        per_node = min(per_node, gpus - gpu_id) if gpus - gpu_id < per_node else per_node
        model = models[slug]
        region = regions[rng.randrange(len(regions))]
        node_id += 1
        hostname = f"{slug}-{region.slug}-{node_id:06d}"
        grouped = groupable and per_node == 8 and rng.random() < 0.35
        group = ""
        if grouped:  # network groups of up to 32 nodes of one model in one region
            n = grouped_count[(region.slug, slug)] = grouped_count.get((region.slug, slug), -1) + 1
            group = f"{region.slug}-{slug}-ib-{n // 32}"
        health = rng.choices(["healthy", "degraded", "unreachable"], [985, 10, 5])[0]
        world.add(
            "catalog_node", node_id, hostname, region.pk, model.pk,
            f"http://{hostname}:9400/metrics", "amd" if model.vendor == "amd" else "dcgm", "",
            "active", health, "InfiniBand NDR 400 Gb/s × 8" if grouped else "none", group, "",
            now, now, "", 22,
        )  # fmt: skip
        ids = []
        for index in range(per_node):
            gpu_id += 1
            ids.append(gpu_id)
            world.add(
                "catalog_gpu",
                gpu_id,
                node_id,
                index,
                fleet_gpu_identity(gpu_id, hostname, index, model.vendor),
            )
        patterns = LANES.get(per_node) or [((1,) * per_node, 1)]
        lanes = rng.choices([p for p, _ in patterns], [w for _, w in patterns])[0]
        # A third of the grouped nodes are booked whole as clusters, in blocks of four.
        cluster_block = None
        if grouped and rng.random() < 0.33:
            n = block_count[group] = block_count.get(group, -1) + 1
            cluster_block = (group, n // CLUSTER_BLOCK)
            lanes = (8,)
        nodes.append(
            {"id": node_id, "model": slug, "model_id": model.pk, "gpus": ids, "lanes": lanes,
             "group": group, "block": cluster_block, "health": health}
        )  # fmt: skip
    return nodes


# A buyer's country and VAT id prefix, and its weight: Polish companies (domestic VAT), EU
# companies (reverse charge), companies outside the EU, and consumers.
BUYERS = [("PL", "PL526", 45), ("DE", "DE13", 20), ("FR", "FR40", 5), ("US", "", 15), ("", "", 15)]


def _people(world, team_count, password, now, first_user, first_team):
    """Teams of 1–6 members, with ids after those the database holds already."""
    rng = world.rng
    teams, user_id = [], first_user
    for team_id in range(first_team, first_team + team_count):
        members = []
        for n in range(rng.randint(1, 6)):
            user_id += 1
            joined = now - timedelta(days=rng.randint(30, 900))
            world.add(
                "auth_user", user_id, password, None, False, f"user{user_id}", "", "",
                f"user{user_id}@scale.example", False, True, joined,
            )  # fmt: skip
            members.append(user_id)
            role = Role.OWNER if n == 0 else rng.choice([Role.MEMBER, Role.BILLING, Role.MEMBER])
            world.add("accounts_membership", team_id, user_id, role, joined)
        country, vat_id = rng.choices(BUYERS, [w for *_, w in BUYERS])[0][:2]
        business = bool(country)
        world.add(
            "accounts_team", team_id, f"Team {team_id}", None, now - timedelta(days=900), None,
            False, f"Team {team_id} sp. z o.o." if business else "",
            f"ul. Prosta {team_id}\n00-850 Warszawa" if business else "", country,
            f"{vat_id}{team_id:07d}" if vat_id else "",
        )  # fmt: skip
        treatment = treatment_for(country=country, vat_id=vat_id, is_business=business)
        teams.append((team_id, members, treatment))
    return teams


class _Booker:
    """Allocations along each lane of the fleet, with everything a booking leaves."""

    def __init__(self, world, periods, prices, now, start):
        self.world, self.rng = world, world.rng
        self.periods, self.prices = periods, prices
        self.now, self.start = now, start
        self.allocations = []  # (allocation id, paid_from): teams are assigned afterwards

    def _length(self):
        slug, _, most = self.rng.choices(PERIOD_MIX, [w for _, w, _ in PERIOD_MIX])[0]
        return slug, self.rng.randint(1, most)

    def walk(self, nodes_ids, gpu_count, model_slug, model_id, group=None):
        """One lane's timeline: on `nodes_ids` (one node, or a cluster block's nodes)."""
        rng, now = self.rng, self.now
        t = self.start + timedelta(days=rng.uniform(0, MEAN_GAP_DAYS))
        while True:
            slug, count = self._length()
            period = self.periods[slug]
            paid_from = _minute(t)
            ahead = timedelta(0) if rng.random() < 0.7 else timedelta(hours=rng.uniform(1, 24 * 7))
            created = paid_from - ahead
            if created > now or paid_from > now + AHEAD:
                return
            nodes = nodes_ids
            if group is not None and rng.random() < 0.4:
                nodes = nodes_ids[:2]  # a two-node cluster on the block's first two
            cancelled = ahead > timedelta(0) and rng.random() < CANCEL_SHARE
            cancelled_at = created + (paid_from - created) * rng.uniform(0.1, 0.9)
            if cancelled and cancelled_at > now:
                cancelled = False
            self._allocation(
                nodes, gpu_count, model_slug, model_id, slug, period, count,
                paid_from, created, cancelled and cancelled_at, group,
            )  # fmt: skip
            t = (
                paid_from
                if cancelled
                else self._until + timedelta(days=rng.expovariate(1 / MEAN_GAP_DAYS))
            )

    def _allocation(
        self, nodes, gpu_count, model_slug, model_id, slug, period, count,
        paid_from, created, cancelled_at, group,
    ):  # fmt: skip
        world, rng, now = self.world, self.rng, self.now
        price = self.prices[(model_slug, slug)]
        # Extensions: some of the periods were bought later, each a day before the end.
        extensions = []
        if not cancelled_at and count > 1 and rng.random() < EXTEND_SHARE:
            booked = rng.randint(1, count - 1)
            rest = count - booked
            while rest:
                step = rng.randint(1, rest)
                extensions.append(step)
                rest -= step
        else:
            booked = count
        until = paid_from + period.duration * booked
        ext_quotes = []
        for step in extensions:
            at = max(created, until - timedelta(hours=rng.uniform(1, 24)))
            if at > now:
                break
            ext_quotes.append((step, at, until, until + period.duration * step))
            until += period.duration * step
        self._until = until
        node_count = len(nodes) if group else None
        total_gpus = gpu_count * len(nodes)
        quote = world.uuid()
        amount = price.unit_price * total_gpus * booked
        world.add(
            "rentals_quote", quote, None, None, model_id, total_gpus, node_count, period.pk,
            booked, None, paid_from, paid_from + period.duration * booked, created == paid_from,
            amount, price.currency, created - timedelta(minutes=2), created + timedelta(minutes=13),
            QuoteKind.BOOKING, None, None, *HOST_SHARE[model_slug],
        )  # fmt: skip
        world.add("rentals_quoteline", quote, 0, QuoteLineKind.GPU, None, total_gpus, booked,
                  total_gpus * booked, price.unit_price, amount, None)  # fmt: skip
        cluster = None
        if group:
            cluster = world.uuid()
            world.add(
                "rentals_cluster",
                cluster,
                None,
                None,
                quote,
                model_id,
                len(nodes),
                group[0],
                created,
            )
        if cancelled_at:
            state = AllocationState.CANCELLED
        elif until <= now:
            state = AllocationState.EXPIRED
        elif paid_from > now:
            state = AllocationState.SCHEDULED
        else:
            state = (
                AllocationState.STOPPED if rng.random() < STOP_SHARE else AllocationState.RUNNING
            )
        for position, node in enumerate(nodes):
            allocation = world.uuid()
            self.allocations.append(allocation)
            warned_24h = until - timedelta(hours=24) if until - timedelta(hours=24) <= now else None
            warned_1h = (
                until - timedelta(hours=1)
                if until - timedelta(hours=1) <= now and not cancelled_at
                else None
            )
            if cancelled_at:
                warned_24h = None
            world.add(
                "rentals_allocation", allocation, None, None, quote, cluster, model_id, node["id"],
                gpu_count, period.pk, paid_from, until, state, created, warned_24h, warned_1h, None,
                *HOST_SHARE[model_slug],
            )  # fmt: skip
            for gpu in node["lane"]:
                world.add(
                    "rentals_allocationgpu", allocation, gpu, paid_from, until, bool(cancelled_at)
                )
            self._events(allocation, created, paid_from, until, state, cancelled_at)
            charged = position == 0
            if charged:
                world.add("rentals_ledgerentry", None, None, allocation, LedgerKind.CHARGE, amount,
                          price.currency, LedgerReason.BOOKING, booked, created, None, None, quote)  # fmt: skip
                world.add("rentals_notice", None, allocation, "", NoticeKind.BOOKED,
                          paid_from + period.duration * booked, created, created + timedelta(seconds=5),
                          1, "", None, quote)  # fmt: skip
            for step, at, old_until, new_until in ext_quotes:
                if not charged:
                    continue
                ext = world.uuid()
                ext_amount = price.unit_price * total_gpus * step
                world.add(
                    "rentals_quote", ext, None, None, model_id, total_gpus, node_count, period.pk,
                    step, None, old_until, new_until, False, ext_amount, price.currency,
                    at - timedelta(minutes=1), at + timedelta(minutes=14), QuoteKind.EXTENSION,
                    allocation, at, *HOST_SHARE[model_slug],
                )  # fmt: skip
                world.add("rentals_quoteline", ext, 0, QuoteLineKind.GPU, None, total_gpus, step,
                          total_gpus * step, price.unit_price, ext_amount, None)  # fmt: skip
                world.add("rentals_ledgerentry", None, None, allocation, LedgerKind.CHARGE,
                          ext_amount, price.currency, LedgerReason.EXTENSION, step, at, None, None,
                          ext)  # fmt: skip
                world.add(
                    "rentals_allocationevent", allocation, at, None, EventKind.EXTEND, "", "", ""
                )
                world.add("rentals_notice", None, allocation, "", NoticeKind.EXTENDED, new_until, at,
                          at + timedelta(seconds=5), 1, "", None, ext)  # fmt: skip
            if cancelled_at and charged:
                world.add("rentals_ledgerentry", None, None, allocation, LedgerKind.REFUND, amount,
                          price.currency, LedgerReason.CANCELLATION, None, cancelled_at, None, None,
                          quote)  # fmt: skip
                world.add("rentals_notice", None, allocation, "", NoticeKind.REFUNDED, until,
                          cancelled_at, cancelled_at + timedelta(seconds=5), 1, "", None, quote)  # fmt: skip
            for kind, hours in ((NoticeKind.EXPIRY_24H, 24), (NoticeKind.EXPIRY_1H, 1)):
                at = until - timedelta(hours=hours)
                if not cancelled_at and at <= now and at > created:
                    world.add("rentals_notice", None, allocation, "", kind, until, at,
                              at + timedelta(seconds=3), 1, "", at + timedelta(hours=rng.uniform(0, 2)), None)  # fmt: skip

    def _events(self, allocation, created, paid_from, until, state, cancelled_at):
        world, rng, now = self.world, self.rng, self.now
        first = AllocationState.SCHEDULED if created < paid_from else AllocationState.RUNNING
        world.add(
            "rentals_allocationevent", allocation, created, None, EventKind.BOOKED, "", first, ""
        )
        if cancelled_at:
            world.add("rentals_allocationevent", allocation, cancelled_at, None, EventKind.CANCEL,
                      AllocationState.SCHEDULED, AllocationState.CANCELLED, "")  # fmt: skip
            return
        if first == AllocationState.SCHEDULED and paid_from <= now:
            world.add("rentals_allocationevent", allocation, paid_from, None, EventKind.START,
                      AllocationState.SCHEDULED, AllocationState.RUNNING, "")  # fmt: skip
        last = AllocationState.RUNNING
        if paid_from <= now and (state == AllocationState.STOPPED or rng.random() < STOP_SHARE):
            stop = paid_from + (min(until, now) - paid_from) * rng.uniform(0.2, 0.9)
            world.add("rentals_allocationevent", allocation, stop, None, EventKind.STOP,
                      AllocationState.RUNNING, AllocationState.STOPPED, "")  # fmt: skip
            last = AllocationState.STOPPED
            if state != AllocationState.STOPPED:
                start = stop + (min(until, now) - stop) * rng.uniform(0.1, 0.9)
                world.add("rentals_allocationevent", allocation, start, None, EventKind.START,
                          AllocationState.STOPPED, AllocationState.RUNNING, "")  # fmt: skip
                last = AllocationState.RUNNING
        if state == AllocationState.EXPIRED:
            world.add("rentals_allocationevent", allocation, until, None, EventKind.EXPIRE, last,
                      AllocationState.EXPIRED, "")  # fmt: skip


def _assign_teams(world, teams, customer, customer_team):
    """Owners for the allocations (quotes, clusters, ledger rows, notices follow): 2,000 to
    the benchmark's customer, the rest to teams drawn with a long tail (a few big ones).
    The owner's tax treatment gives each quote its VAT (one line each: the line's VAT is the
    quote's), and each charge the net and VAT of the quote it charged; a refund refunds the
    booking's charge whole."""
    rng = world.rng
    rows = world.rows
    allocations = rows["rentals_allocation"]
    picked = set(rng.sample(range(len(allocations)), min(CUSTOMER_ALLOCATIONS, len(allocations))))
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(teams))]
    consumer = treatment_for(country="", vat_id="", is_business=False)
    owner_of_quote, owner_of_allocation = {}, {}
    for i, row in enumerate(allocations):
        quote = row[3]
        if quote not in owner_of_quote:
            if i in picked:
                owner_of_quote[quote] = (customer_team, customer, consumer)
            else:
                team, members, treatment = rng.choices(teams, weights)[0]
                owner_of_quote[quote] = (team, rng.choice(members), treatment)
        owner_of_allocation[row[0]] = owner_of_quote[quote]
        allocations[i] = (row[0], *owner_of_quote[quote][:2], *row[3:])
    money = {}  # quote id: (gross, net, vat)
    quotes = []
    for r in rows["rentals_quote"]:
        team, user, treatment = owner_of_quote.get(r[0]) or owner_of_allocation[r[17]]
        rate = rate_for(treatment)
        net = r[12]
        vat = vat_split([net], rate, r[13])[1]
        money[r[0]] = (net + vat, net, vat)
        quotes.append((r[0], team, user, *r[3:12], net + vat, *r[13:19], treatment, rate, net, vat,
                       *r[19:]))  # fmt: skip
    rows["rentals_quote"] = quotes
    rows["rentals_quoteline"] = [(*r[:9], money[r[0]][2]) for r in rows["rentals_quoteline"]]
    rows["rentals_cluster"] = [
        (r[0], *owner_of_quote[r[3]][:2], *r[3:]) for r in rows["rentals_cluster"]
    ]
    period_of = {row[0]: row[8] for row in allocations}
    ledger = []
    for r in rows["rentals_ledgerentry"]:
        gross, net, vat = money[r[11]]
        charge = r[3] == LedgerKind.CHARGE
        ledger.append((*owner_of_allocation[r[2]][:2], *r[2:4], gross, *r[5:9], net, vat,
                       r[11] if charge else None, period_of[r[2]]))  # fmt: skip
    rows["rentals_notice"] = [
        (owner_of_allocation[r[1]][1], *r[1:]) for r in rows["rentals_notice"]
    ]
    rows["rentals_allocationevent"] = [
        (r[0], r[1], owner_of_allocation[r[0]][1] if r[3] != EventKind.EXPIRE else None, *r[3:])
        for r in rows["rentals_allocationevent"]
    ]
    # The statement's 50,000 rows: one-period extension charges on the customer's own
    # allocations, spread over the year (a padding the ledger's constraints allow), each
    # naming the quote of the charge it copies.
    charges = [r for r in ledger if r[0] == customer_team and r[3] == LedgerKind.CHARGE]
    pad = CUSTOMER_LEDGER_ROWS - sum(1 for r in ledger if r[0] == customer_team)
    for n in range(max(pad, 0)):
        base = charges[n % len(charges)]
        at = base[8] + timedelta(minutes=1 + n // len(charges))
        ledger.append((*base[:6], LedgerReason.EXTENSION, 1, at, *base[9:]))
    rows["rentals_ledgerentry"] = ledger


def _flags(world, nodes, now, days):
    """Closed flags over the year (about one XID or heat event per 3 GPU-years… at a
    fleet's pace), open ones on the unhealthy nodes and a few hot GPUs."""
    rng = world.rng
    span = timedelta(days=days)
    for node in nodes:
        for gpu in node["gpus"]:
            if rng.random() < 0.3 * days / 365:
                kind = rng.choice([FlagKind.XID, FlagKind.HOT])
                opened = now - span * rng.random()
                closed = opened + timedelta(hours=rng.uniform(0.1, 12))
                world.add("telemetry_flag", node["id"], gpu, kind, FLAG_SEVERITY[kind],
                          "", 79 if kind == FlagKind.XID else None, opened, min(closed, now),
                          min(closed, now), "")  # fmt: skip
        if node["health"] == "unreachable":
            opened = now - timedelta(hours=rng.uniform(0.5, 48))
            kind = FlagKind.NODE_UNREACHABLE
            world.add("telemetry_flag", node["id"], None, kind, FLAG_SEVERITY[kind],
                      "connection refused", None, opened, now, None, "")  # fmt: skip
        elif rng.random() < 0.02:
            kind = FlagKind.HOT
            opened = now - timedelta(hours=rng.uniform(0.1, 6))
            world.add("telemetry_flag", node["id"], node["gpus"][0], kind, FLAG_SEVERITY[kind],
                      "92 °C", None, opened, now, None, "")  # fmt: skip


def generate_scale(
    *, gpus: int, days: int, seed: int = 32, hourly_days: int = 7, raw_hours: float = 1.0,
    reset: bool = False, minutes_rolled: bool = True, log=print,
) -> dict:  # fmt: skip
    """Generate the world (module docstring); returns seconds per step and rows per table."""
    User = get_user_model()
    rng = random.Random(seed)
    world = _World(rng)
    timings = {}
    started = time.perf_counter()

    def step(name):
        nonlocal started
        timings[name] = round(time.perf_counter() - started, 2)
        log(f"  {name}: {timings[name]} s")
        started = time.perf_counter()

    with connection.cursor() as cursor:
        if reset:
            cursor.execute(sql.truncate(sql.TABLES))
            User.objects.filter(username__in=[CUSTOMER, STAFF]).delete()
            User.objects.filter(email__endswith="@scale.example").delete()
    now = _minute(db_now())
    start = now - timedelta(days=days)
    periods, prices, regions = _catalog()
    models = {m.slug: m for m in GpuModel.objects.all()}
    customer = User.objects.create_user(CUSTOMER, f"{CUSTOMER}@scale.example", "scale-password")
    User.objects.create_user(STAFF, f"{STAFF}@scale.example", "scale-password", is_staff=True)
    customer_team = personal_team(customer).pk
    # Invoiced, as its generated history is and every generated team is (the column's
    # default), whatever a new sign-up's mode is here (NEW_TEAM_BILLING_MODE).
    Team.objects.filter(pk=customer_team).update(billing_mode=BillingMode.INVOICED)
    step("catalog and the benchmark's accounts")

    nodes = _fleet(world, gpus, regions, models, now)
    password = make_password("scale-password")  # once, shared by every generated user
    first_user = User.objects.aggregate(last=Max("id"))["last"] + 1
    first_team = Team.objects.aggregate(last=Max("id"))["last"] + 1
    teams = _people(world, max(20, gpus // 30), password, now, first_user, first_team)
    step("fleet and people (Python)")

    booker = _Booker(world, periods, prices, now, start)
    for node in nodes:
        if node["block"]:
            continue
        offset = 0
        lanes = []
        for size in node["lanes"]:
            lanes.append(node["gpus"][offset : offset + size])
            offset += size
        for lane in lanes:
            booker.walk([{"id": node["id"], "lane": lane}], len(lane),
                        node["model"], node["model_id"])  # fmt: skip
    blocks: dict[tuple, list] = {}
    for node in nodes:
        if node["block"]:
            blocks.setdefault(node["block"], []).append(node)
    for block, members in sorted(blocks.items()):
        targets = [{"id": n["id"], "lane": n["gpus"]} for n in members]
        booker.walk(targets, 8, members[0]["model"],
                    members[0]["model_id"], group=block)  # fmt: skip
    _assign_teams(world, teams, customer.pk, customer_team)
    _flags(world, nodes, now, days)
    step("allocations, ledger, notices, flags (Python)")

    counts = {}
    # Foreign keys are checked as each COPY ends, not deferred to the commit: with hundreds of
    # thousands of checks pending, every row of a table with a row trigger (the audit's)
    # cost time in proportion to the queue, and the allocations' COPY grew quadratically
    # (0.7 s at 1k GPUs, 84 s at 10k). The one reference forward in COLUMNS' order, an
    # extension quote's allocation, is met by copying those quotes and their lines after
    # the allocations.
    extends = [name for name, _ in COLUMNS["rentals_quote"]].index("extends_id")
    later: dict[str, list[tuple[Any, ...]]] = {"rentals_quote": [], "rentals_quoteline": []}
    extensions = {r[0] for r in world.rows["rentals_quote"] if r[extends] is not None}
    for table in later:
        rows, world.rows[table] = world.rows[table], []
        for row in rows:
            (later[table] if row[0] in extensions else world.rows[table]).append(row)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.CONSTRAINTS_IMMEDIATE)
        raw = cursor.cursor
        for table in COLUMNS:
            counts[table] = _copy(raw, table, world.rows[table])
            world.rows[table] = []
            step(f"COPY {table} ({counts[table]} rows)")
            if table == "rentals_allocation":
                for extension_table, rows in later.items():
                    counts[extension_table] += _copy(raw, extension_table, rows)
                    step(f"COPY {extension_table} ({len(rows)} extension rows)")
        for table in ("auth_user", "accounts_team", "catalog_node", "catalog_gpu", "rentals_ledgerentry",
                      "rentals_allocationevent", "rentals_notice", "telemetry_flag", "rentals_quoteline",
                      "rentals_allocationgpu", "accounts_membership"):  # fmt: skip
            cursor.execute(sql.sequence_reset(table), [table])
        # The holdings were written around the services: every model's capacity summary is
        # read whole on its next refresh (no node named).
        capacity_changed(gpu_model_ids=GpuModel.objects.values_list("pk", flat=True))
    counts.update(_telemetry(now, days, hourly_days, raw_hours, step))
    if minutes_rolled:
        counts["fleet minutes"] = telemetry_rollup(now=now)["fleet_minute"]
        step(f"fleet minutes ({counts['fleet minutes']} rows, the rollup task once)")
    # The dashboard's closed hours and days, as the task every minute has written them.
    counts["closed steps"] = sum(allocated_steps_close(now=now).values())
    step(f"closed dashboard steps ({counts['closed steps']} rows, the task once)")
    # As autovacuum leaves a deployment's tables: statistics everywhere, and the year's rows
    # (bookings, the ledger, rollups) on pages marked all-visible, which the index-only scans
    # of the dashboard and the statement rely on. The raw samples and polls are the last
    # hours' writes (what the rollup and /metrics read), not yet vacuumed in a live
    # deployment either: they get statistics only. VACUUM cannot run in a transaction; a
    # caller inside one gets the statistics only.
    vacuum = not connection.in_atomic_block
    with connection.cursor() as cursor:
        for table in (*COLUMNS, "telemetry_gpuhour", "telemetry_gpuday", "telemetry_fleetrollup"):
            cursor.execute(sql.vacuum_analyze(table) if vacuum else sql.analyze(table))
        for table in ("telemetry_gpusample", "telemetry_poll"):
            cursor.execute(sql.analyze(table))
    step("VACUUM (ANALYZE) and ANALYZE" if vacuum else "ANALYZE")
    return {"now": now, "timings": timings, "rows": counts, "customer": customer.pk}


def _telemetry(now, days, hourly_days, raw_hours, step) -> dict:
    """The database computes telemetry's bulk (anchorgpu/sql.py): rollups, samples, polls."""
    hour = now.replace(minute=0)
    today = hour.replace(hour=0)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    poll = timedelta(seconds=settings.ANCHORGPU["POLL_INTERVAL"])
    raw_from = hour - timedelta(hours=math.ceil(raw_hours))
    counts = {}
    fills = [
        ("GPU days", sql.hours_fill("telemetry_gpuday"), RollupBucket.DAY, today - timedelta(days=days), today, timedelta(days=1)),
        ("GPU hours", sql.hours_fill("telemetry_gpuhour"), RollupBucket.HOUR, raw_from - timedelta(days=hourly_days), raw_from, timedelta(hours=1)),
        ("fleet day rollups", sql.FLEET_FILL, RollupBucket.DAY, today - timedelta(days=days), today, timedelta(days=1)),
        ("fleet hour rollups", sql.FLEET_FILL, RollupBucket.HOUR, today - timedelta(days=days), raw_from, timedelta(hours=1)),
    ]  # fmt: skip
    sample_partitions_ensure(now=now)
    month_partitions_ensure(now=now)
    month = (today - timedelta(days=days)).replace(day=1)
    while month <= today:  # the months of GPU hours and days, as beat kept them ahead
        for table in MONTHLY:
            month_partition_create(table, month.date())
        month = (month + timedelta(days=32)).replace(day=1)
    with transaction.atomic(), connection.cursor() as cursor:
        for name, statement, bucket, since, until, size in fills:
            seconds = size.total_seconds()
            params: dict[str, Any] = {  # Any: the stubs' parameter types leave out timedelta
                "bucket": bucket, "from": since, "until": until, "step": size,
                "samples": int(seconds / poll.total_seconds()), "seconds": seconds,
                "threshold": threshold,
            }  # fmt: skip
            cursor.execute(statement, params)
            counts[name] = cursor.rowcount
            step(f"{name} ({cursor.rowcount} rows)")
        cursor.execute(sql.FLEET_SIZE_FILL, {"from": today - timedelta(days=days), "until": hour})
        samples: dict[str, Any] = {"from": raw_from, "until": now, "step": poll}  # as above
        cursor.execute(sql.SAMPLES_FILL, samples)
        counts["raw samples"] = cursor.rowcount
        step(f"raw samples ({cursor.rowcount} rows)")
        polls: dict[str, Any] = {
            "from": raw_from, "until": now, "step": poll, "outcome": PollOutcome.OK,
        }  # fmt: skip
        cursor.execute(sql.POLLS_FILL, polls)
        counts["polls"] = cursor.rowcount
        step(f"polls ({cursor.rowcount} rows)")
    step("commit")
    return counts
