"""What each rentals change says to a webhook receiver: its Standard Webhooks `type`, a
stable message id (the `webhook-id`, the same on every retry), and its JSON body."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from core.money import quantize
from rentals.access import connection_details, tenant_login
from rentals.models import (
    MAINTENANCE_NOTICES,
    Allocation,
    AllocationEvent,
    EventKind,
    Notice,
    NoticeKind,
)
from webhooks.models import EventType


@dataclass(frozen=True)
class Message:
    team_id: int
    type: str
    id: str
    body: str


def body_text(event_type: str, at: datetime, data: dict) -> str:
    """The body, compact and in a fixed key order: the signed bytes."""
    return json.dumps(
        {"type": event_type, "timestamp": at, "data": data},
        cls=DjangoJSONEncoder, separators=(",", ":"),
    )  # fmt: skip


def allocation_data(allocation: Allocation, *, state: str | None = None) -> dict:
    return {
        "id": allocation.pk, "state": state or allocation.state,
        "gpu_model": allocation.gpu_model.slug, "gpu_count": allocation.gpu_count,
        "node": allocation.node.hostname, "region": allocation.node.region.slug,
        "paid_from": allocation.paid_from, "paid_until": allocation.paid_until,
        "quote": allocation.quote_id, "cluster": allocation.cluster_id,
        "impaired_since": allocation.impaired_since,
    }  # fmt: skip


_BY_KIND: dict[str, EventType] = {
    EventKind.START: EventType.STARTED,
    EventKind.STOP: EventType.STOPPED,
    EventKind.CANCEL: EventType.CANCELLED,
    EventKind.EXTEND: EventType.EXTENDED,
    EventKind.EXPIRE: EventType.EXPIRED,
    EventKind.ACCESS_GRANTED: EventType.ACCESS_READY,
    EventKind.ACCESS_REVOKED: EventType.ACCESS_REVOKED,
    EventKind.MOVE: EventType.MOVED,
    EventKind.REPLACE: EventType.MOVED,
    EventKind.IMPAIRED: EventType.IMPAIRED,
    EventKind.RECOVERED: EventType.RECOVERED,
}


def from_events(event_ids: list[int], *, team_ids: set[int]) -> list[Message]:
    """The messages of these allocation events, for allocations of `team_ids`, in order.
    A booking says `booking.created` once (a cluster's, for all its nodes), then each
    allocation's `allocation.scheduled` or `allocation.started`."""
    events = (
        AllocationEvent.objects.filter(pk__in=event_ids, allocation__team_id__in=team_ids)
        .select_related("allocation__gpu_model", "allocation__node__region", "allocation__quote")
        .order_by("id")
    )
    messages, booked = [], set()
    for event in events:
        allocation = event.allocation
        data: dict[str, Any] = {
            "allocation": allocation_data(allocation, state=event.to_state or None),
            "event": {"kind": event.kind, "from_state": event.from_state,
                      "to_state": event.to_state, "at": event.at},
        }  # fmt: skip
        if event.kind == EventKind.BOOKED:
            if allocation.quote_id not in booked:
                booked.add(allocation.quote_id)
                messages.append(_booking_message(allocation, event.at))
            kind = EventType.SCHEDULED if event.to_state == "scheduled" else EventType.STARTED
        elif event.kind in _BY_KIND:
            kind = _BY_KIND[event.kind]
            if event.kind == EventKind.ACCESS_GRANTED:
                data["access"] = connection_details(allocation.node, tenant_login(allocation.pk))
            if event.kind == EventKind.IMPAIRED:  # which GPUs cannot work
                data["impaired"] = _impaired_gpus(allocation, event.at)
            if event.kind in _SWAPS:  # the GPUs it holds now, and where to log in
                data["gpus"] = _gpus_now(allocation)
                data["access"] = connection_details(allocation.node, tenant_login(allocation.pk))
        else:  # a change with no message of its own (SSH keys chosen)
            continue
        messages.append(
            Message(allocation.team_id, kind, f"evt_{event.pk}", body_text(kind, event.at, data))
        )
    return messages


_SWAPS = (EventKind.MOVE, EventKind.REPLACE)


def _impaired_gpus(allocation: Allocation, at: datetime) -> list[dict]:
    """The GPUs of the impaired span that opened at `at`."""
    span = allocation.impaired_spans.filter(started_at=at).first()
    held = allocation.held.select_related("gpu").filter(gpu_id__in=span.gpus if span else [])
    return [{"uuid": h.gpu.uuid, "index": h.gpu.index} for h in held.order_by("gpu__index")]


def _gpus_now(allocation: Allocation) -> list[dict]:
    return [
        {"uuid": h.gpu.uuid, "index": h.gpu.index}
        for h in allocation.held.select_related("gpu").filter(ends_at=allocation.paid_until)
    ]


def _booking_message(allocation: Allocation, at: datetime) -> Message:
    quote = allocation.quote
    members = (
        list(Allocation.objects.filter(cluster_id=allocation.cluster_id).order_by("id"))
        if allocation.cluster_id
        else [allocation]
    )
    data = {
        "booking": allocation.pk, "quote": quote.pk, "cluster": allocation.cluster_id,
        "allocations": [m.pk for m in members], "gpu_model": allocation.gpu_model.slug,
        "gpu_count": quote.gpu_count, "node_count": quote.node_count,
        "paid_from": allocation.paid_from, "paid_until": allocation.paid_until,
        "amount": str(quantize(quote.total, quote.currency)), "currency": quote.currency,
    }  # fmt: skip
    kind = EventType.BOOKING_CREATED
    return Message(allocation.team_id, kind, f"bkg_{quote.pk}", body_text(kind, at, data))


def from_notices(notice_ids: list[int], *, team_ids: set[int]) -> list[Message]:
    """`allocation.expiring` for the 24 h and 1 h warnings (the moments of the notices), and
    `allocation.maintenance` for what a maintenance window did to an allocation."""
    notices = (
        Notice.objects.filter(
            pk__in=notice_ids,
            kind__in=[NoticeKind.EXPIRY_24H, NoticeKind.EXPIRY_1H, *MAINTENANCE_NOTICES],
            allocation__team_id__in=team_ids,
        )
        .select_related("allocation__gpu_model", "allocation__node__region", "maintenance")
        .order_by("id")
    )
    return [_notice_message(n) for n in notices]


def _notice_message(notice: Notice) -> Message:
    allocation = notice.allocation
    assert allocation is not None, "from_notices reads allocations' notices only"
    data: dict[str, Any] = {"allocation": allocation_data(allocation)}
    if notice.kind in MAINTENANCE_NOTICES:
        kind, window = EventType.MAINTENANCE, notice.maintenance
        assert window is not None, "a maintenance notice names its window"
        moved = notice.kind == NoticeKind.MAINTENANCE_MOVED
        data["action"] = "moved" if moved else "cancelled"
        data["maintenance"] = {
            "id": window.pk, "starts_at": window.starts_at, "ends_at": window.ends_at,
            "reason": window.reason,
        }  # fmt: skip
        if moved:
            data["gpus"] = _gpus_now(allocation)
    else:
        kind = EventType.EXPIRING
        data["ends_at"] = notice.ends_at
        data["within"] = "24h" if notice.kind == NoticeKind.EXPIRY_24H else "1h"
    return Message(
        allocation.team_id, kind, f"ntc_{notice.pk}",
        body_text(kind, notice.created_at, data),
    )  # fmt: skip
