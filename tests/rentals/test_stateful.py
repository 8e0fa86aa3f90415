"""A stateful Hypothesis test over book / stop / start / extend / advance clock / expire.

Invariants: stop and start never move paid_until, no GPU is held twice at once, and an
allocation is expired exactly when the clock has reached its paid_until.
"""

import contextlib
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from accounts.roles import acting_as
from core.errors import DomainError
from rentals.models import Allocation
from rentals.services import (
    allocation_extend,
    allocation_start,
    allocation_stop,
    allocations_enforce,
)
from tests.support.booking import book
from tests.support.factories.catalog import catalog_setup
from tests.support.races import overlapping_pairs

pytestmark = pytest.mark.django_db


class PaidPeriodMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        from django.contrib.auth import get_user_model

        # Each example runs in a savepoint that teardown rolls back: a clean fleet every time.
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.user = get_user_model().objects.get_or_create(username="machine")[0]
        self.now = timezone.now()
        self.paid_until = {}

    def teardown(self):
        if hasattr(self, "atomic"):
            transaction.set_rollback(True)
            self.atomic.__exit__(None, None, None)

    @rule(count=st.integers(1, 4), days=st.integers(1, 3))
    def book(self, count, days):
        try:
            allocation = book(
                self.user, model="l4", count=count, period="day", periods=days, now=self.now
            )
        except DomainError:
            return
        self.paid_until[allocation.pk] = allocation.paid_until

    @precondition(lambda self: self.paid_until)
    @rule(data=st.data())
    def stop(self, data):
        pk = data.draw(st.sampled_from(list(self.paid_until)))
        with contextlib.suppress(DomainError):
            allocation_stop(acting=acting_as(self.user), allocation=Allocation(pk=pk), now=self.now)

    @precondition(lambda self: self.paid_until)
    @rule(data=st.data())
    def start(self, data):
        pk = data.draw(st.sampled_from(list(self.paid_until)))
        with contextlib.suppress(DomainError):
            allocation_start(
                acting=acting_as(self.user), allocation=Allocation(pk=pk), now=self.now
            )

    @precondition(lambda self: self.paid_until)
    @rule(data=st.data(), periods=st.integers(1, 2))
    def extend(self, data, periods):
        pk = data.draw(st.sampled_from(list(self.paid_until)))
        try:
            allocation = allocation_extend(
                acting=acting_as(self.user),
                allocation=Allocation(pk=pk),
                period_count=periods,
                now=self.now,
            )
        except DomainError:
            return
        assert allocation.paid_until == self.paid_until[pk] + timedelta(days=periods)
        self.paid_until[pk] = allocation.paid_until

    @rule(hours=st.integers(1, 72))
    def advance_clock(self, hours):
        self.now += timedelta(hours=hours)

    @rule()
    def enforce(self):
        allocations_enforce(now=self.now)

    @invariant()
    def paid_until_moves_only_by_extension(self):
        if not hasattr(self, "paid_until"):
            return
        for pk, until in Allocation.objects.values_list("pk", "paid_until"):
            assert until == self.paid_until[pk]

    @invariant()
    def no_gpu_is_held_twice(self):
        assert overlapping_pairs() == 0

    @invariant()
    def expired_exactly_when_the_clock_passed_paid_until(self):
        if not hasattr(self, "now"):
            return
        allocations_enforce(now=self.now)
        for state, until in Allocation.objects.values_list("state", "paid_until"):
            assert (state == "expired") == (self.now >= until)


PaidPeriodMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def test_paid_period_state_machine(db):
    catalog_setup()
    PaidPeriodMachine.TestCase("runTest").runTest()
