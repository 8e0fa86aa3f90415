"""Every charge is the total of a quote the customer could read first, over random sequences
of bookings, extension quotes, extensions, price changes and cancellations (Hypothesis)."""

import contextlib
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from accounts.roles import acting_as
from catalog.models import GpuModel, RentalPeriod
from catalog.services import gpu_price_set
from core.errors import DomainError
from rentals.models import Allocation, AllocationState, LedgerEntry, LedgerKind, Quote
from rentals.services import (
    allocation_book,
    allocation_cancel,
    allocation_extend,
    extension_quote_create,
    quote_create,
)
from tests.support.factories.catalog import catalog_setup

pytestmark = pytest.mark.django_db


class ChargesMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.atomic = transaction.atomic()  # rolled back after each example
        self.atomic.__enter__()
        self.acting = acting_as(get_user_model().objects.create_user("charges"))
        # Preconditions read this Python state, not the database, so that Hypothesis
        # replays an example exactly.
        self.allocations: list = []
        self.scheduled: list = []
        self.pending_extension = {}

    def teardown(self):
        if hasattr(self, "atomic"):
            transaction.set_rollback(True)
            self.atomic.__exit__(None, None, None)

    @rule(count=st.integers(1, 2), days=st.integers(1, 3), later=st.booleans(),
          scratch=st.integers(0, 3))  # fmt: skip
    def book(self, count, days, later, scratch):
        starts_at = timezone.now() + timedelta(days=2) if later else None
        options = [{"option": "nvme-scratch", "quantity": scratch}] if scratch else []
        try:
            quote = quote_create(
                acting=self.acting, gpu_model="l4", gpu_count=count, period="day",
                period_count=days, starts_at=starts_at, options=options,
            )  # fmt: skip
            allocation = allocation_book(acting=self.acting, quote=quote)
        except DomainError:
            return
        self.allocations.append(allocation.pk)
        if later:
            self.scheduled.append(allocation.pk)

    @rule(cents=st.integers(100, 10_000))
    def change_the_price(self, cents):
        gpu_price_set(
            gpu_model=GpuModel.objects.get(slug="l4"), period=RentalPeriod.objects.get(slug="day"),
            unit_price=Decimal(cents) / 100,
        )  # fmt: skip

    @precondition(lambda self: self.allocations)
    @rule(data=st.data(), periods=st.integers(1, 2))
    def quote_an_extension(self, data, periods):
        allocation = Allocation.objects.get(pk=data.draw(st.sampled_from(self.allocations)))
        try:
            quote = extension_quote_create(
                acting=self.acting, allocation=allocation, period_count=periods
            )
        except DomainError:
            return
        self.pending_extension[allocation.pk] = quote

    @precondition(lambda self: self.pending_extension)
    @rule(data=st.data())
    def extend_as_quoted(self, data):
        pk = data.draw(st.sampled_from(list(self.pending_extension)))
        quote = self.pending_extension.pop(pk)
        with contextlib.suppress(DomainError):  # the GPUs may be taken, the quote stale
            allocation_extend(acting=self.acting, allocation=Allocation(pk=pk), quote=quote)

    @precondition(lambda self: self.scheduled)
    @rule(data=st.data())
    def cancel(self, data):
        pk = data.draw(st.sampled_from(self.scheduled))
        self.scheduled.remove(pk)
        self.pending_extension.pop(pk, None)
        allocation_cancel(acting=self.acting, allocation=Allocation(pk=pk))

    @invariant()
    def every_charge_is_a_quote_total(self):
        # In four queries, whatever the number of allocations: it runs after every step.
        charges, refunds, quoted = defaultdict(list), defaultdict(Decimal), defaultdict(list)
        for pk, kind, amount in LedgerEntry.objects.filter(
            allocation__isnull=False, kind__in=[LedgerKind.CHARGE, LedgerKind.REFUND]
        ).values_list("allocation_id", "kind", "amount"):
            if kind == LedgerKind.CHARGE:
                charges[pk].append(amount)
            else:
                refunds[pk] += amount
        for pk, total in Quote.objects.filter(
            extends__isnull=False, used_at__isnull=False
        ).values_list("extends_id", "total"):
            quoted[pk].append(total)
        for pk, state, total in Allocation.objects.values_list("pk", "state", "quote__total"):
            assert sorted(charges[pk]) == sorted([total, *quoted[pk]])
            if state == AllocationState.CANCELLED:
                assert refunds[pk] == total + sum(quoted[pk])
            else:
                assert pk not in refunds


ChargesMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=15, deadline=None,
    suppress_health_check=list(HealthCheck), database=None,
)  # fmt: skip


def test_charges_equal_quotes_over_random_sequences(db):
    catalog_setup()  # once: each example runs in a savepoint of this test's transaction
    ChargesMachine.TestCase("runTest").runTest()
