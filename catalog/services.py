"""Writes to the catalog: price changes (audited) and bulk fleet import."""

import csv
import io
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from catalog.models import (
    ExporterKind,
    Gpu,
    GpuModel,
    GpuPrice,
    Node,
    NodeState,
    Option,
    OptionPrice,
    PriceChange,
    Region,
    RentalPeriod,
)
from catalog.selectors import gpu_price_at, option_price_at
from catalog.software import stack_from_report, version_key, version_or_none
from core.db import db_now
from core.errors import Invalid, validated
from core.money import Money, default_currency, quantize
from core.versions import CATALOG, bump

PriceT = TypeVar("PriceT", GpuPrice, OptionPrice)


def price_start_check(effective_from: datetime | None) -> datetime:
    """When a new price takes effect: now (the database's clock) when not given; a time in
    the past is refused, so history is never rewritten. The admin form asks this too."""
    now = db_now()
    if effective_from is None:
        return now
    if effective_from < now:
        raise ValidationError(_("A price takes effect now or later, never in the past."))
    return effective_from


def _not_in_the_past(effective_from: datetime | None) -> datetime:
    try:
        return price_start_check(effective_from)
    except ValidationError as exc:
        raise Invalid({"effective_from": exc.messages}) from exc


@transaction.atomic
def gpu_price_set(
    *,
    gpu_model: GpuModel,
    period: RentalPeriod,
    unit_price: Decimal,
    currency: str | None = None,
    effective_from: datetime | None = None,
    user: AbstractBaseUser | None = None,
) -> GpuPrice:
    """Schedule a new price, now or later; earlier rows stay, so nothing quoted or sold is
    repriced and history is never rewritten."""
    effective_from = _not_in_the_past(effective_from)
    return _price_add(
        GpuPrice(gpu_model=gpu_model, period=period),
        old=gpu_price_at(gpu_model=gpu_model, period=period, at=effective_from),
        subject=f"{gpu_model.name} per GPU per {period.name}",
        unit_price=unit_price, currency=currency, effective_from=effective_from, user=user,
    )  # fmt: skip


@transaction.atomic
def option_price_set(
    *,
    option: Option,
    period: RentalPeriod | None,
    unit_price: Decimal,
    currency: str | None = None,
    effective_from: datetime | None = None,
    user: AbstractBaseUser | None = None,
) -> OptionPrice:
    """Schedule a new option price (per period, or per booking without one), as
    `gpu_price_set` does."""
    effective_from = _not_in_the_past(effective_from)
    return _price_add(
        OptionPrice(option=option, period=period),
        old=option_price_at(option=option, period=period, at=effective_from),
        subject=f"{option.name} per {period.name if period else 'booking'}",
        unit_price=unit_price, currency=currency, effective_from=effective_from, user=user,
    )  # fmt: skip


def _price_add(
    price: PriceT,
    *,
    old: GpuPrice | OptionPrice | None,
    subject: str,
    unit_price: Decimal,
    currency: str | None,
    effective_from: datetime,
    user: AbstractBaseUser | None,
) -> PriceT:
    """Save a new price row (`price` names what it prices) and its audit line, inside the
    caller's transaction."""
    price.unit_price, price.currency = unit_price, currency or default_currency()
    price.effective_from = effective_from
    # The user model (accounts) is a layer above: AbstractBaseUser is what catalog names.
    price.created_by = user  # type: ignore[assignment]
    validated(price)
    price.save()
    PriceChange.objects.create(
        user=user,  # type: ignore[misc]  # the user model, as above
        subject=subject,
        old_price=str(quantize(old.unit_price, old.currency)) if old else "",
        new_price=str(Money(price.unit_price, price.currency)),
        effective_from=effective_from,
    )
    return price


FLEET_COLUMNS = ["hostname", "region", "gpu_model", "telemetry_url", "exporter", "gpu_ids"]


@transaction.atomic
def fleet_import(*, text: str) -> dict[str, int]:
    """Add or update nodes and their GPUs from CSV; all rows or none.

    Columns: hostname, region, gpu_model (slugs), telemetry_url, exporter (dcgm|amd),
    gpu_ids (UUIDs or serials separated by `;`, in index order); optional state, fabric and
    network_group.
    Errors name the line and column.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in FLEET_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise Invalid({"file": f"missing columns: {', '.join(missing)}"})
    regions = {r.slug: r for r in Region.objects.all()}
    models = {m.slug: m for m in GpuModel.objects.all()}
    errors = []
    created = updated = gpus = 0
    for line, row in enumerate(reader, start=2):
        row = {k: (v or "").strip() for k, v in row.items() if k}
        problems = []
        if row["region"] not in regions:
            problems.append(f"unknown region {row['region']!r}")
        if row["gpu_model"] not in models:
            problems.append(f"unknown GPU model {row['gpu_model']!r}")
        if row["exporter"] not in ExporterKind.values:
            problems.append(f"exporter must be one of {', '.join(ExporterKind.values)}")
        state = row.get("state") or NodeState.ACTIVE
        if state not in NodeState.values:
            problems.append(f"state must be one of {', '.join(NodeState.values)}")
        ids = [g.strip() for g in row["gpu_ids"].split(";") if g.strip()]
        if not ids:
            problems.append("gpu_ids is empty")
        if len(set(ids)) != len(ids):
            problems.append("gpu_ids repeats an id")
        if problems:
            errors.append(f"line {line}: {'; '.join(problems)}")
            continue
        node = Node.objects.filter(hostname=row["hostname"]).first() or Node(
            hostname=row["hostname"]
        )
        is_new = node.pk is None
        node.region = regions[row["region"]]
        node.gpu_model = models[row["gpu_model"]]
        node.telemetry_url = row["telemetry_url"]
        node.exporter = row["exporter"]
        node.state = state
        # optional columns: the node-to-node fabric and the network group clusters span
        node.fabric = row.get("fabric") or node.fabric or "none"
        node.network_group = row.get("network_group", node.network_group) or ""
        try:
            node.full_clean()
        except ValidationError as exc:
            errors.append(f"line {line}: {'; '.join(exc.messages)}")
            continue
        node.save()
        for index, uuid in enumerate(ids):
            clash = Gpu.objects.filter(uuid=uuid).exclude(node=node).first()
            if clash:
                errors.append(f"line {line}: GPU {uuid} already belongs to {clash.node.hostname}")
                continue
            Gpu.objects.update_or_create(node=node, index=index, defaults={"uuid": uuid})
            gpus += 1
        created += is_new
        updated += not is_new
    if errors:
        raise Invalid({"file": errors})
    return {"created": created, "updated": updated, "gpus": gpus}


def node_software_record(*, node_id: int, report: dict[str, Any], at: datetime) -> bool:
    """Keep the stack a node's agent reported (catalog.software.stack_from_report); False
    when it is what was kept already (most reports: a stack rarely changes). One UPDATE,
    so a report racing another writes whole or not at all."""
    stack = stack_from_report(report)
    fields = {
        "driver_version": stack["driver"] or stack["amdgpu"],
        "cuda_version": stack["cuda"],
        "rocm_version": stack["rocm"],
    }
    keys = {
        name.replace("_version", "_key"): version_key(value) if value else None
        for name, value in fields.items()
    }
    changed = (
        Node.objects.filter(pk=node_id)
        .exclude(software=stack, **fields)
        .update(**fields, **keys, software=stack, software_reported_at=at)
    )
    if changed:
        bump(CATALOG)  # the catalog's software column (an UPDATE sends no signal)
    return bool(changed)


def node_exporter_driver_record(*, drivers: dict[int, str]) -> None:
    """The driver each node's exporter names (its DCGM_FI_DRIVER_VERSION label), where it
    changed: a poll round's nodes, one statement per distinct driver (a handful)."""
    by_driver: dict[str, list[int]] = {}
    for node_id, driver in drivers.items():
        by_driver.setdefault(version_or_none(driver) or "", []).append(node_id)
    for driver, node_ids in by_driver.items():
        Node.objects.filter(pk__in=node_ids).exclude(exporter_driver_version=driver).update(
            exporter_driver_version=driver
        )
