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
        count = 8 if extracted is None else extracted
        prefix = "" if self.exporter == ExporterKind.AMD else "GPU-"
        Gpu.objects.bulk_create(
            Gpu(node=self, index=i, uuid=f"{prefix}{self.hostname}-{i}") for i in range(count)
        )


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
    day, week, month = (
        RentalPeriod.objects.create(slug=slug, name_en=slug, name_pl=polish, duration=duration)
        for slug, polish, duration in (
            ("day", "dzień", timedelta(hours=24)),
            ("week", "tydzień", timedelta(days=7)),
            ("month", "miesiąc", timedelta(days=30)),
        )
    )
    h100 = GpuModelFactory(slug="h100", name="H100 SXM")
    l4 = GpuModelFactory(slug="l4", name="L4", memory_gb=24, memory_reported_mib=23034, fp8=True)
    mi300x = GpuModelFactory(
        slug="mi300x", name="MI300X", vendor="amd", stack="rocm", compute_target="gfx942",
        memory_gb=192, memory_reported_mib=196592,
    )  # fmt: skip
    for model, (d, w, m) in {
        h100: ("57.60", "362.88", "1296.00"),
        l4: ("13.20", "83.16", "297.00"),
        mi300x: ("45.60", "287.28", "1026.00"),
    }.items():
        price(model, day, d)
        price(model, week, w)
        price(model, month, m)
    scratch = Option.objects.create(
        slug="nvme-scratch", name_en="NVMe scratch", name_pl="Przestrzeń NVMe", unit_en="TB",
        unit_pl="TB", billing=OptionBilling.PER_PERIOD, max_quantity=16,
    )  # fmt: skip
    ipv4 = Option.objects.create(
        slug="public-ipv4", name_en="Public IPv4", name_pl="Publiczny IPv4", unit_en="address",
        unit_pl="adres", billing=OptionBilling.PER_PERIOD, max_quantity=2,
    )  # fmt: skip
    ipv4.gpu_models.set([h100])
    setup = Option.objects.create(
        slug="custom-image", name_en="Custom image", name_pl="Własny obraz", unit_en="setup",
        unit_pl="przygotowanie", billing=OptionBilling.ONE_TIME, max_quantity=1,
    )  # fmt: skip
    past = timezone.now() - timedelta(days=1)
    for period, amount in ((day, "4.00"), (week, "25.00"), (month, "90.00")):
        OptionPrice.objects.create(
            option=scratch, period=period, unit_price=Decimal(amount), effective_from=past
        )
        OptionPrice.objects.create(
            option=ipv4, period=period, unit_price=Decimal("5.00"), effective_from=past
        )
    OptionPrice.objects.create(
        option=setup, period=None, unit_price=Decimal("150.00"), effective_from=past
    )
    region = RegionFactory(slug="pl-waw", name_en="Warsaw", name_pl="Warszawa")
    nodes = []
    # Each tuple of `h100_nodes` is one network group (clusters span one group only).
    for number, group in enumerate(h100_nodes, start=1):
        for size in group:
            nodes.append(
                NodeFactory(
                    gpu_model=h100, region=region, gpus=size, network_group=f"ib-{number}",
                    fabric="InfiniBand NDR 400 Gb/s × 8",
                )
            )  # fmt: skip
    nodes.append(NodeFactory(gpu_model=l4, region=region, gpus=4))
    nodes.append(NodeFactory(gpu_model=mi300x, region=region, gpus=8, exporter=ExporterKind.AMD))
    return Catalog(day, week, month, h100, l4, mi300x, scratch, setup, ipv4, nodes)
