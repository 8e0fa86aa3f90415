"""Demo data: a realistic catalog and fleet (sizing.md §3) and four demo accounts.

Every step is an upsert, so running it again changes nothing that is already there. Words
customers read come as (English, Polish) pairs: the catalog's content in both languages.
"""

import uuid
from datetime import timedelta
from decimal import Decimal

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction
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
from catalog.services import node_software_record

PERIODS = [
    ("day", ("day", "dzień"), timedelta(hours=24)),
    ("week", ("week", "tydzień"), timedelta(days=7)),
    ("month", ("month", "miesiąc"), timedelta(days=30)),
]

# slug, name, vendor, GB, MiB reported, GB/s, stack, target, fp8, bf16, link, $/GPU-hour
MODELS: list[
    tuple[str, str, str, int, int, int, str, str, bool, bool, str | tuple[str, str], str]
] = [
    ("h200", "NVIDIA H200 SXM", "nvidia", 141, 143771, 4800, "cuda", "9.0", True, True,
     "NVLink 4, 900 GB/s", "3.60"),
    ("h100-sxm", "NVIDIA H100 SXM", "nvidia", 80, 81559, 3350, "cuda", "9.0", True, True,
     "NVLink 4, 900 GB/s", "2.40"),
    ("a100-80gb", "NVIDIA A100 80GB SXM", "nvidia", 80, 81920, 2039, "cuda", "8.0", False, True,
     "NVLink 3, 600 GB/s", "1.40"),
    ("l40s", "NVIDIA L40S", "nvidia", 48, 46068, 864, "cuda", "8.9", True, True,
     ("none (PCIe Gen4 ×16)", "brak (PCIe Gen4 ×16)"), "1.05"),
    ("l4", "NVIDIA L4", "nvidia", 24, 23034, 300, "cuda", "8.9", True, True,
     ("none (PCIe)", "brak (PCIe)"), "0.55"),
    ("mi300x", "AMD Instinct MI300X", "amd", 192, 196592, 5300, "rocm", "gfx942", True, True,
     "Infinity Fabric, 896 GB/s", "1.90"),
]  # fmt: skip

# vCPUs and GiB of host memory per GPU: each model's 8-GPU cloud shape divided by 8 (AWS
# p5e/p5 for H200/H100, p4de for A100, g6e for L40S, g6 for L4, Azure ND MI300X v5).
HOST_SHARE = {
    "h200": (24, 256), "h100-sxm": (24, 256), "a100-80gb": (12, 144), "l40s": (24, 192),
    "l4": (24, 96), "mi300x": (12, 224),
}  # fmt: skip

NOTES: dict[str, tuple[str, str]] = {
    "mi300x": (
        "FP8 is the FNUZ variant (e4m3fnuz/e5m2fnuz); check your checkpoints.",
        "FP8 w wariancie FNUZ (e4m3fnuz/e5m2fnuz); sprawdź swoje punkty kontrolne.",
    ),
    "a100-80gb": ("No FP8 tensor cores: W8A16 only.", "Bez rdzeni tensorowych FP8: tylko W8A16."),
}

# Longer commitments are cheaper per hour.
PERIOD_DISCOUNT = {"day": Decimal("1.00"), "week": Decimal("0.90"), "month": Decimal("0.75")}

# slug, name, unit, billing, max quantity, description, price per period (None: one time),
# the models it applies to (None: every model)
OPTIONS: list[
    tuple[str, tuple[str, str], tuple[str, str], OptionBilling, int, tuple[str, str],
          dict[str | None, str], list[str] | None]
] = [
    ("nvme-scratch", ("NVMe scratch", "Przestrzeń robocza NVMe"), ("TB", "TB"),
     OptionBilling.PER_PERIOD, 16,
     ("Local NVMe scratch space, wiped at the end of the rental.",
      "Lokalna przestrzeń robocza NVMe, czyszczona po zakończeniu wynajmu."),
     {"day": "4.00", "week": "25.00", "month": "90.00"}, None),
    ("public-ipv4", ("Public IPv4 address", "Publiczny adres IPv4"), ("address", "adres"),
     OptionBilling.PER_PERIOD, 4,
     ("A routable IPv4 address on the node.", "Routowalny adres IPv4 na węźle."),
     {"day": "1.00", "week": "5.00", "month": "18.00"}, None),
    ("priority-support", ("Priority support", "Wsparcie priorytetowe"), ("plan", "plan"),
     OptionBilling.PER_PERIOD, 1,
     ("A 1-hour response target from our engineers.",
      "Odpowiedź naszych inżynierów w ciągu godziny."),
     {"day": "30.00", "week": "150.00", "month": "500.00"}, None),
    ("custom-image", ("Custom image setup", "Przygotowanie własnego obrazu"),
     ("setup", "przygotowanie"), OptionBilling.ONE_TIME, 1,
     ("We build and verify your OS image before the start.",
      "Budujemy i sprawdzamy Twój obraz systemu przed startem."),
     {None: "150.00"}, None),
]  # fmt: skip

# Options that ask the customer something, and how long before the start they need.
OPTION_INPUTS = {
    "custom-image": (
        ("Image to set up (a registry reference, e.g. ghcr.io/acme/train:1.4)",
         "Obraz do przygotowania (adres w rejestrze, np. ghcr.io/acme/train:1.4)"),
        timedelta(hours=24),
    ),
}  # fmt: skip

REGIONS = [
    ("pl-waw", ("Warsaw", "Warszawa")),
    ("de-fra", ("Frankfurt", "Frankfurt nad Menem")),
    ("us-east", ("Ashburn", "Ashburn")),
]

IB_NDR = "InfiniBand NDR 400 Gb/s × 8"
ROCE = "RoCE 200 Gb/s"

# region, model, nodes, GPUs per node, node-to-node fabric and network group (whole nodes
# of one group can be booked together as a cluster)
FLEET = [
    ("pl-waw", "h200", 2, 8, "none", ""), ("pl-waw", "h100-sxm", 4, 8, IB_NDR, "waw-ib-1"),
    ("pl-waw", "l40s", 1, 4, "none", ""), ("de-fra", "h100-sxm", 1, 8, "none", ""),
    ("de-fra", "a100-80gb", 2, 8, ROCE, "fra-roce-1"), ("de-fra", "l4", 2, 4, "none", ""),
    ("us-east", "mi300x", 2, 8, "none", ""), ("us-east", "h200", 1, 8, "none", ""),
    ("us-east", "l40s", 1, 4, "none", ""),
]  # fmt: skip

# The software each demo node's agent would report, by hostname: one model on different
# drivers (so "Will it run?" and `requires_cuda` have something to tell apart), versions from
# NVIDIA's and AMD's published pairs (docs/reference/software-compatibility.md §1, §6). A
# node left out reports nothing: its stack is unknown.
_UBUNTU, _KERNEL = "Ubuntu 24.04.2 LTS", "6.8.0-51-generic"


def _nvidia(driver, cuda, cc, name, os=_UBUNTU, kernel=_KERNEL, gpus=8):
    return {"vendor": "nvidia", "driver": driver, "cuda": cuda, "os": os, "kernel": kernel,
            "gpus": [{"index": i, "name": name, "compute_cap": cc} for i in range(gpus)]}  # fmt: skip


def _amd(rocm, amdgpu, gfx, name, gpus=8):
    return {"vendor": "amd", "rocm": rocm, "amdgpu": amdgpu, "os": "Ubuntu 22.04.5 LTS",
            "kernel": "5.15.0-126-generic",
            "gpus": [{"index": i, "name": name, "gfx_target": gfx} for i in range(gpus)]}  # fmt: skip


SOFTWARE = {
    "h200-pl-waw-01": _nvidia("580.65.06", "13.0", "9.0", "NVIDIA H200"),
    "h200-pl-waw-02": _nvidia("575.57.08", "12.9", "9.0", "NVIDIA H200"),
    "h100-sxm-pl-waw-01": _nvidia("580.65.06", "13.0", "9.0", "NVIDIA H100 80GB HBM3"),
    "h100-sxm-pl-waw-02": _nvidia("580.65.06", "13.0", "9.0", "NVIDIA H100 80GB HBM3"),
    "h100-sxm-pl-waw-03": _nvidia("570.124.06", "12.8", "9.0", "NVIDIA H100 80GB HBM3"),
    "h100-sxm-pl-waw-04": _nvidia(
        "550.127.05",
        "12.4",
        "9.0",
        "NVIDIA H100 80GB HBM3",
        os="Ubuntu 22.04.5 LTS",
        kernel="5.15.0-126-generic",
    ),
    "l40s-pl-waw-01": _nvidia("560.35.05", "12.6", "8.9", "NVIDIA L40S", gpus=4),
    "h100-sxm-de-fra-01": _nvidia(
        "535.104.05",
        "12.2",
        "9.0",
        "NVIDIA H100 80GB HBM3",
        os="Ubuntu 22.04.5 LTS",
        kernel="5.15.0-126-generic",
    ),
    "a100-80gb-de-fra-01": _nvidia("570.124.06", "12.8", "8.0", "NVIDIA A100-SXM4-80GB"),
    "a100-80gb-de-fra-02": _nvidia("535.104.05", "12.2", "8.0", "NVIDIA A100-SXM4-80GB"),
    "l4-de-fra-01": _nvidia("580.65.06", "13.0", "8.9", "NVIDIA L4", gpus=4),
    "l4-de-fra-02": _nvidia("550.54.15", "12.4", "8.9", "NVIDIA L4", gpus=4),
    "mi300x-us-east-01": _amd("7.1.1", "6.16.6", "gfx942", "AMD Instinct MI300X"),
    "mi300x-us-east-02": _amd("6.3.3", "6.10.5", "gfx942", "AMD Instinct MI300X"),
    "h200-us-east-01": _nvidia("580.82.07", "13.0", "9.0", "NVIDIA H200"),
    # l40s-us-east-01: no agent report yet (its stack shows as unknown)
}

# username, e-mail, staff, superuser. Staff read dashboards and allocations and change
# nothing; `pricing` is staff who may also schedule prices (the Pricing group); `admin` all.
USERS = [
    ("alice", "alice@example.com", False, False),
    ("bob", "bob@example.com", False, False),
    ("staff", "staff@example.com", True, False),
    ("pricing", "pricing@example.com", True, False),
    ("admin", "admin@example.com", True, True),
]
PRICING_USERS = {"pricing"}


def _words(field: str, words: str | tuple[str, str]) -> dict[str, str]:
    """{"name_en": …, "name_pl": …} from an (English, Polish) pair; one word serves both."""
    english, polish = (words, words) if isinstance(words, str) else words
    return {f"{field}_en": english, f"{field}_pl": polish}


def gpu_identity(hostname: str, index: int, vendor: str) -> str:
    digest = uuid.uuid5(uuid.NAMESPACE_DNS, f"{hostname}/{index}")
    if vendor == "amd":
        return f"6924{digest.int % 10**8:08d}"
    return f"GPU-{digest}"


@transaction.atomic
def _option_input(slug: str) -> dict:
    asks, lead_time = OPTION_INPUTS.get(slug, ("", timedelta(0)))
    return {**_words("input_label", asks), "lead_time": lead_time}


def seed_catalog(*, simulator_url: str | None = None) -> None:
    periods: dict[str | None, RentalPeriod] = {}
    for slug, words, duration in PERIODS:
        periods[slug], _ = RentalPeriod.objects.update_or_create(
            slug=slug, defaults={**_words("name", words)}, create_defaults={
                **_words("name", words), "duration": duration
            },
        )  # fmt: skip
    now = timezone.now()
    models = {}
    for slug, name, vendor, gb, mib, bw, stack, target, fp8, bf16, link, hourly in MODELS:
        models[slug], _ = GpuModel.objects.update_or_create(
            slug=slug,
            defaults=dict(
                name=name, vendor=vendor, memory_gb=gb, memory_reported_mib=mib,
                bandwidth_gbps=bw, stack=stack, compute_target=target, fp8=fp8, bf16=bf16,
                vcpus_per_gpu=HOST_SHARE[slug][0], ram_gib_per_gpu=HOST_SHARE[slug][1],
                **_words("interconnect", link), **_words("notes", NOTES.get(slug, "")),
            ),
        )  # fmt: skip
        for period in periods.values():
            if not GpuPrice.objects.filter(gpu_model=models[slug], period=period).exists():
                hours = Decimal(int(period.duration.total_seconds() // 3600))
                price = (Decimal(hourly) * hours * PERIOD_DISCOUNT[period.slug]).quantize(
                    Decimal("1.00")
                )
                # Seeded history, not a price change: in force since a month ago.
                GpuPrice.objects.create(
                    gpu_model=models[slug], period=period, unit_price=price,
                    effective_from=now - timedelta(days=30),
                )  # fmt: skip
    for slug, words, unit, billing, max_q, description, prices, applies in OPTIONS:
        option, _ = Option.objects.update_or_create(
            slug=slug,
            defaults=dict(
                **_words("name", words),
                **_words("unit", unit),
                **_words("description", description),
                billing=billing,
                max_quantity=max_q,
                **_option_input(slug),
            ),  # fmt: skip
        )
        if applies:
            option.gpu_models.set([models[s] for s in applies])
        for period_slug, amount in prices.items():
            per = periods.get(period_slug)  # None: a one-time option's price
            if not OptionPrice.objects.filter(option=option, period=per).exists():
                OptionPrice.objects.create(
                    option=option, period=per, unit_price=Decimal(amount),
                    effective_from=now - timedelta(days=30),
                )  # fmt: skip
    regions = {}
    for slug, words in REGIONS:
        regions[slug], _ = Region.objects.update_or_create(
            slug=slug, defaults=_words("name", words)
        )
    for region, model_slug, count, per_node, fabric, group in FLEET:
        model = models[model_slug]
        for n in range(1, count + 1):
            hostname = f"{model_slug}-{region}-{n:02d}"
            exporter = ExporterKind.AMD if model.vendor == "amd" else ExporterKind.DCGM
            url = (
                f"{simulator_url}/nodes/{hostname}/metrics"
                if simulator_url
                else f"http://{hostname}:{5000 if exporter == 'amd' else 9400}/metrics"
            )
            node, _ = Node.objects.update_or_create(
                hostname=hostname,
                defaults={
                    "region": regions[region],
                    "gpu_model": model,
                    "exporter": exporter,
                    "telemetry_url": url,
                    "fabric": fabric,
                    "network_group": group,
                },
            )
            if hostname in SOFTWARE:
                node_software_record(node_id=node.pk, report=SOFTWARE[hostname], at=now)
            for index in range(per_node):
                Gpu.objects.get_or_create(
                    node=node,
                    index=index,
                    defaults={"uuid": gpu_identity(hostname, index, model.vendor)},
                )


@transaction.atomic
def seed_users(*, password: str) -> None:
    User = get_user_model()
    pricing, _ = Group.objects.get_or_create(name="Pricing")
    pricing.permissions.set(
        Permission.objects.filter(
            content_type__app_label="catalog",
            codename__in=[
                "change_prices",
                "add_gpuprice",
                "view_gpuprice",
                "add_optionprice",
                "view_optionprice",
                "view_gpumodel",
                "view_option",
            ],
        )  # fmt: skip
    )
    for username, email, is_staff, is_superuser in USERS:
        user, _ = User.objects.get_or_create(username=username, defaults={"email": email})
        user.email, user.is_staff, user.is_superuser = email, is_staff, is_superuser
        if not user.check_password(password):  # a new salt would end every API token
            user.set_password(password)
        user.save()
        EmailAddress.objects.update_or_create(
            user=user, email=email, defaults={"verified": True, "primary": True}
        )
        if username in PRICING_USERS:
            user.groups.add(pricing)
        else:
            user.groups.remove(pricing)
