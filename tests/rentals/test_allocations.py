from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core import mail
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import Gpu, RentalPeriod
from catalog.services import gpu_price_set
from core.errors import Conflict
from rentals.errors import NoCapacity, QuoteExpired, QuoteUsed
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationGpu,
    LedgerEntry,
    MaintenanceWindow,
)
from rentals.services import (
    allocation_book,
    allocation_cancel,
    allocation_extend,
    allocation_start,
    allocation_stop,
    allocations_enforce,
    expiry_notices_record,
    notice_send,
    notices_unsent,
    quote_create,
)
from tests.support.booking import book
from tests.support.races import overlapping_pairs

pytestmark = pytest.mark.django_db


def test_booking_holds_specific_gpus_and_charges_the_quote_total(catalog, alice):
    quote = quote_create(acting=acting_as(alice), gpu_model="h100", gpu_count=2, period="week", period_count=1,
        options=[{"option": "nvme-scratch", "quantity": 1}],
    )  # fmt: skip
    allocation = allocation_book(acting=acting_as(alice), quote=quote)

    assert allocation.state == "running"
    assert allocation.paid_until - allocation.paid_from == timedelta(days=7)
    held = list(allocation.held.select_related("gpu"))
    assert len(held) == 2 and len({h.gpu.node_id for h in held}) == 1
    charge = LedgerEntry.objects.get(allocation=allocation)
    assert (charge.kind, charge.amount) == ("charge", quote.total)
    assert (charge.net, charge.vat) == (Decimal("750.76"), Decimal("172.67"))  # 23 % VAT
    assert list(allocation.events.values_list("kind", "to_state")) == [("booked", "running")]


def test_placement_packs_onto_the_fullest_node(catalog, alice):
    four_gpu_node = catalog.nodes[2]
    first = book(alice, count=2)
    assert first.node == four_gpu_node
    second = book(alice, count=2)
    assert second.node == four_gpu_node
    whole = book(alice, count=8)
    assert whole.node in catalog.nodes[:2]


def test_a_quote_books_once_and_not_after_it_expires(catalog, alice):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="day", period_count=1
    )
    allocation_book(acting=acting_as(alice), quote=quote)
    with pytest.raises(QuoteUsed):
        allocation_book(acting=acting_as(alice), quote=quote)

    stale = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="day", period_count=1
    )
    with pytest.raises(QuoteExpired):
        allocation_book(
            acting=acting_as(alice), quote=stale, now=stale.valid_until + timedelta(seconds=1)
        )
    assert Allocation.objects.count() == 1
    assert LedgerEntry.objects.count() == 1


def test_no_capacity_at_booking_time_changes_nothing(catalog, alice, bob):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=4, period="day", period_count=1
    )
    taken = book(bob, model="l4", count=1)
    with pytest.raises(NoCapacity) as error:
        allocation_book(acting=acting_as(alice), quote=quote)
    assert error.value.earliest_start == taken.paid_until
    assert Allocation.objects.filter(user=alice).count() == 0
    assert LedgerEntry.objects.filter(user=alice).count() == 0


def test_database_refuses_overlap_even_without_the_service(catalog, alice):
    allocation = book(alice, model="l4", count=1)
    held = allocation.held.get()
    other = book(alice, model="l4", count=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        AllocationGpu.objects.filter(allocation=other).update(gpu=held.gpu)
    with pytest.raises(IntegrityError), transaction.atomic():
        AllocationGpu.objects.create(
            allocation=other, gpu=held.gpu, starts_at=held.ends_at, ends_at=held.ends_at
        )  # empty range
    assert overlapping_pairs() == 0


def test_a_holding_names_its_gpus_node_whatever_the_writer_says(catalog, alice):
    """The database keeps a holding's node (rentals 0028): set from its GPU on every insert
    (the booking's statement and the ORM pass none, or a wrong one), and moved with the GPU."""
    allocation = book(alice, model="h100", count=2)
    holdings = AllocationGpu.objects.filter(allocation=allocation).select_related("gpu")
    for holding in holdings:
        assert holding.node_id == holding.gpu.node_id == allocation.node_id
    other_node = next(
        n for n in catalog.nodes if n.gpu_model == catalog.h100 and n != allocation.node
    )
    held = holdings[0]
    AllocationGpu.objects.filter(pk=held.pk).update(node=other_node)  # refused: set back
    assert AllocationGpu.objects.get(pk=held.pk).node_id == allocation.node_id
    window = MaintenanceWindow.objects.create(
        starts_at=held.ends_at, ends_at=held.ends_at + timedelta(hours=1), reason="firmware",
        created_by=alice, created_at=timezone.now(),
    )  # fmt: skip
    written = AllocationGpu.objects.create(
        maintenance=window, gpu=held.gpu, node=other_node, starts_at=window.starts_at,
        ends_at=window.ends_at,
    )  # fmt: skip
    assert AllocationGpu.objects.get(pk=written.pk).node_id == allocation.node_id
    Gpu.objects.filter(pk=held.gpu_id).update(node=other_node, index=99)  # the GPU moves
    assert set(AllocationGpu.objects.filter(gpu=held.gpu_id).values_list("node", flat=True)) == {
        other_node.pk
    }
    assert (
        AllocationGpu.objects.exclude(gpu=held.gpu_id).exclude(node_id=F("gpu__node_id")).count()
        == 0
    )


def test_a_ledger_row_names_its_allocations_period_or_the_database_refuses_it(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day",
                      starts_at=timezone.now() + timedelta(days=2))  # fmt: skip
    week = RentalPeriod.objects.get(slug="week")
    charge = LedgerEntry.objects.get(allocation=allocation)
    assert charge.period_id == allocation.period_id != week.pk
    with pytest.raises(IntegrityError), transaction.atomic():
        LedgerEntry.objects.filter(pk=charge.pk).update(period=week)
    with pytest.raises(IntegrityError), transaction.atomic():
        Allocation.objects.filter(pk=allocation.pk).update(period=week)  # its rows name it
    allocation_cancel(acting=acting_as(alice), allocation=allocation)
    assert set(LedgerEntry.objects.filter(allocation=allocation).values_list("kind", "period")) == {
        ("charge", allocation.period_id),
        ("refund", allocation.period_id),
    }


def test_stop_and_start_never_move_the_paid_period(catalog, alice):
    allocation = book(alice)
    before = (allocation.paid_from, allocation.paid_until)
    with time_machine.travel(timezone.now() + timedelta(hours=5), tick=False):
        allocation = allocation_stop(acting=acting_as(alice), allocation=allocation)
    with time_machine.travel(timezone.now() + timedelta(days=2), tick=False):
        allocation = allocation_start(acting=acting_as(alice), allocation=allocation)
    allocation.refresh_from_db()
    assert (allocation.paid_from, allocation.paid_until) == before
    assert list(allocation.events.values_list("kind", flat=True)) == ["booked", "stop", "start"]


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE rentals_allocation SET paid_from = paid_from + interval '1 hour'",
        "UPDATE rentals_allocation SET paid_until = paid_until - interval '1 hour'",
        "UPDATE rentals_allocation SET state = 'stopped', paid_until = paid_until + interval '1 hour'",
        "UPDATE rentals_allocation SET state = 'scheduled'",
        "UPDATE rentals_allocation SET state = 'cancelled'",
    ],
)
def test_database_refuses_every_other_path_that_moves_the_period(catalog, alice, sql):
    allocation = book(alice)
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)
    allocation.refresh_from_db()
    assert allocation.state == "running"


def test_orm_save_cannot_shift_the_period_either(catalog, alice):
    allocation = book(alice)
    allocation.paid_until -= timedelta(days=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        allocation.save()


def test_cancel_before_start_refunds_in_full_and_frees_the_gpus(catalog, alice):
    start = timezone.now() + timedelta(days=3)
    allocation = book(
        alice,
        model="l4",
        count=4,
        starts_at=start,
        options=[{"option": "custom-image", "quantity": 1}],
    )
    assert allocation.state == "scheduled"
    allocation_cancel(acting=acting_as(alice), allocation=allocation)

    entries = LedgerEntry.objects.filter(allocation=allocation).order_by("at", "id")
    assert [(e.kind, e.net, e.vat, e.amount) for e in entries] == [
        ("charge", Decimal("482.64"), Decimal("111.01"), Decimal("593.65")),
        ("refund", Decimal("482.64"), Decimal("111.01"), Decimal("593.65")),
    ]
    assert book(alice, model="l4", count=4, starts_at=start).state == "scheduled"


def test_no_cancel_after_the_start_only_stop(catalog, alice):
    allocation = book(alice)
    with pytest.raises(Conflict):
        allocation_cancel(acting=acting_as(alice), allocation=allocation)
    assert LedgerEntry.objects.filter(kind="refund").count() == 0


def test_extend_adds_whole_periods_on_the_same_gpus_at_the_current_price(catalog, alice):
    allocation = book(alice, model="l4", count=2, period="day")
    old_until = allocation.paid_until
    gpus = set(allocation.held.values_list("gpu_id", flat=True))
    gpu_price_set(gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("20.00"))

    allocation = allocation_extend(acting=acting_as(alice), allocation=allocation, period_count=3)

    assert allocation.paid_until == old_until + timedelta(days=3)
    assert set(allocation.held.values_list("gpu_id", flat=True)) == gpus
    assert set(allocation.held.values_list("ends_at", flat=True)) == {allocation.paid_until}
    extension = LedgerEntry.objects.filter(allocation=allocation).order_by("-at", "-id").first()
    assert (extension.net, extension.amount) == (Decimal("120.00"), Decimal("147.60"))


def test_extend_refuses_when_the_next_slot_is_taken(catalog, alice, bob):
    allocation = book(alice, model="l4", count=4, period="day")
    book(bob, model="l4", count=1, period="day", starts_at=allocation.paid_until)
    with pytest.raises(Conflict):
        allocation_extend(acting=acting_as(alice), allocation=allocation, period_count=1)
    allocation.refresh_from_db()
    assert LedgerEntry.objects.filter(allocation=allocation).count() == 1
    assert allocation.held.first().ends_at == allocation.paid_until


def test_enforcement_starts_and_expires_by_time_even_when_stopped(catalog, alice):
    now = timezone.now()
    scheduled = book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(hours=1))
    stopped = book(alice, model="h100", count=1, period="day")
    allocation_stop(acting=acting_as(alice), allocation=stopped)

    assert allocations_enforce(now=now + timedelta(hours=2)) == {"started": 1, "expired": 0}
    scheduled.refresh_from_db()
    assert scheduled.state == "running"

    result = allocations_enforce(now=now + timedelta(days=30))  # a month-long outage
    assert result == {"started": 0, "expired": 2}
    assert set(Allocation.objects.values_list("state", flat=True)) == {"expired"}
    assert allocations_enforce(now=now + timedelta(days=30)) == {"started": 0, "expired": 0}
    stopped.refresh_from_db()
    assert stopped.events.last().kind == "expire"


def test_scheduled_and_past_its_end_expires_directly(catalog, alice):
    now = timezone.now()
    scheduled = book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(hours=1))
    assert allocations_enforce(now=now + timedelta(days=3)) == {"started": 0, "expired": 1}
    scheduled.refresh_from_db()
    assert scheduled.state == "expired"


def expiry_warnings_send(*, now):
    """Record the due notices, then send what is owed (what the after-commit task does)."""
    recorded = expiry_notices_record(now=now)
    for pk in notices_unsent(now=now, older_than=timedelta(0)):
        notice_send(notice_id=pk)
    return recorded


def test_expiry_warnings_are_sent_once_each(catalog, alice):
    allocation = book(alice, model="l4", count=1, period="day", periods=2)
    now = timezone.now()
    assert expiry_warnings_send(now=now) == 0
    at_23h = allocation.paid_until - timedelta(hours=23)
    assert expiry_warnings_send(now=at_23h) == 1
    assert expiry_warnings_send(now=at_23h + timedelta(minutes=5)) == 0
    at_50m = allocation.paid_until - timedelta(minutes=50)
    assert expiry_warnings_send(now=at_50m) == 1
    assert expiry_warnings_send(now=at_50m) == 0
    # the booking's receipt, then the two warnings
    assert len(mail.outbox) == 3 and {m.to[0] for m in mail.outbox} == {"alice@example.com"}
    assert "booking confirmed" in mail.outbox[0].subject


def test_events_record_who_did_what(catalog, alice):
    allocation = book(alice)
    allocation_stop(acting=acting_as(alice), allocation=allocation)
    event = AllocationEvent.objects.filter(allocation=allocation, kind="stop").get()
    assert (event.actor, event.from_state, event.to_state) == (alice, "running", "stopped")
