"""Catalog factories: a small, exact catalog whose prices make sums easy to check."""

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import factory
from django.utils import timezone

from catalog.models import (
    ExporterKind,
    Gpu,
    GpuModel,
    GpuPrice,
    Node,
    Option,
    OptionBilling,
    OptionPrice,
    Region,
    RentalPeriod,
)
from core.versions import CATALOG, CATALOG_ROWS, bump


class RegionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Region
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"region-{n}")
    name_en = factory.LazyAttribute(lambda o: o.slug.title())


class GpuModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuModel
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"gpu-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.upper())
    vendor = "nvidia"
    memory_gb = 80
    memory_reported_mib = 81559
    bandwidth_gbps = 3350
    stack = "cuda"
    compute_target = "9.0"
    fp8 = True
    vcpus_per_gpu = 24
    ram_gib_per_gpu = 256


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node
        skip_postgeneration_save = True

    hostname = factory.Sequence(lambda n: f"node-{n:03d}")
    region = factory.SubFactory(RegionFactory)
    gpu_model = factory.SubFactory(GpuModelFactory)
    telemetry_url = factory.LazyAttribute(
        lambda o: f"http://127.0.0.1:9/nodes/{o.hostname}/metrics"
    )
    exporter = ExporterKind.DCGM

    @factory.post_generation
    def gpus(self, create, extracted, **kwargs):
        if create:
            Gpu.objects.bulk_create(node_gpus(self, 8 if extracted is None else extracted))


def node_gpus(node: Node, count: int) -> list[Gpu]:
    """`node`'s GPUs 0 … count-1, unsaved, with the UUIDs its exporter reports."""
    prefix = "" if node.exporter == ExporterKind.AMD else "GPU-"
    return [Gpu(node=node, index=i, uuid=f"{prefix}{node.hostname}-{i}") for i in range(count)]


@dataclass
class Catalog:
    day: RentalPeriod
    week: RentalPeriod
    month: RentalPeriod
    h100: GpuModel
    l4: GpuModel
    mi300x: GpuModel
    scratch: Option
    setup: Option
    ipv4: Option
    nodes: list


def price(model, period, amount, *, ago=timedelta(days=1)):
    return GpuPrice.objects.create(
        gpu_model=model,
        period=period,
        unit_price=Decimal(amount),
        effective_from=timezone.now() - ago,
    )


def catalog_setup(*, h100_nodes=((8, 8), (4,))) -> Catalog:
    """Most tests start from this catalog, so its rows go in one INSERT per table (about a
    dozen statements rather than fifty). A bulk insert sends no post_save: the catalog's
    cached copies are told once at the end, as catalog/signals.py does for each row."""
    now = timezone.now()
    day, week, month = RentalPeriod.objects.bulk_create(
        RentalPeriod(slug=slug, name_en=slug, name_pl=polish, duration=duration)
        for slug, polish, duration in (
            ("day", "dzień", timedelta(hours=24)),
            ("week", "tydzień", timedelta(days=7)),
            ("month", "miesiąc", timedelta(days=30)),
        )
    )
    h100, l4, mi300x = GpuModel.objects.bulk_create(
        [
            GpuModelFactory.build(slug="h100", name="H100 SXM"),
            GpuModelFactory.build(
                slug="l4", name="L4", memory_gb=24, memory_reported_mib=23034, fp8=True
            ),
            GpuModelFactory.build(
                slug="mi300x", name="MI300X", vendor="amd", stack="rocm",
                compute_target="gfx942", memory_gb=192, memory_reported_mib=196592,
            ),
        ]
    )  # fmt: skip
    GpuPrice.objects.bulk_create(
        GpuPrice(
            gpu_model=model, period=period, unit_price=Decimal(amount),
            effective_from=now - timedelta(days=1),
        )
        for model, amounts in {
            h100: ("57.60", "362.88", "1296.00"),
            l4: ("13.20", "83.16", "297.00"),
            mi300x: ("45.60", "287.28", "1026.00"),
        }.items()
        for period, amount in zip((day, week, month), amounts, strict=True)
    )  # fmt: skip
    scratch, ipv4, setup = Option.objects.bulk_create(
        [
            Option(
                slug="nvme-scratch", name_en="NVMe scratch", name_pl="Przestrzeń NVMe",
                unit_en="TB", unit_pl="TB", billing=OptionBilling.PER_PERIOD, max_quantity=16,
            ),
            Option(
                slug="public-ipv4", name_en="Public IPv4", name_pl="Publiczny IPv4",
                unit_en="address", unit_pl="adres", billing=OptionBilling.PER_PERIOD,
                max_quantity=2,
            ),
            Option(
                slug="custom-image", name_en="Custom image", name_pl="Własny obraz",
                unit_en="setup", unit_pl="przygotowanie", billing=OptionBilling.ONE_TIME,
                max_quantity=1,
            ),
        ]
    )  # fmt: skip
    ipv4.gpu_models.set([h100])
    past = now - timedelta(days=1)
    per_period = (
        (option, period, amount)
        for period, scratch_amount in ((day, "4.00"), (week, "25.00"), (month, "90.00"))
        for option, amount in ((scratch, scratch_amount), (ipv4, "5.00"))
    )
    OptionPrice.objects.bulk_create(
        OptionPrice(option=option, period=period, unit_price=Decimal(amount), effective_from=past)
        for option, period, amount in (*per_period, (setup, None, "150.00"))
    )
    region = RegionFactory.build(slug="pl-waw", name_en="Warsaw", name_pl="Warszawa")
    region.save()
    # Each tuple of `h100_nodes` is one network group (clusters span one group only).
    sized = [
        (size, {"gpu_model": h100, "network_group": f"ib-{number}",
                "fabric": "InfiniBand NDR 400 Gb/s × 8"})
        for number, group in enumerate(h100_nodes, start=1)
        for size in group
    ] + [(4, {"gpu_model": l4}), (8, {"gpu_model": mi300x, "exporter": ExporterKind.AMD})]  # fmt: skip
    nodes = Node.objects.bulk_create(
        NodeFactory.build(region=region, gpus=size, **fields) for size, fields in sized
    )
    Gpu.objects.bulk_create(
        gpu for node, (size, _) in zip(nodes, sized, strict=True) for gpu in node_gpus(node, size)
    )
    bump(CATALOG)
    bump(CATALOG_ROWS, now=True)
    return Catalog(day, week, month, h100, l4, mi300x, scratch, setup, ipv4, nodes)
