"""/metrics: the console's own figures for Prometheus, read from the database at scrape time
with prometheus_client's registry (never hand-written text).

Allowed for a staff member's API token, or for `Authorization: Bearer <METRICS_TOKEN>` when
that secret is configured (a Prometheus server has no user of its own).
"""

from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max, Min, Q, Sum
from django.http import HttpResponse
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from rest_framework import authentication, exceptions

from accounts.auth import BearerTokenAuthentication
from catalog.models import Node, NodeState
from invoices.selectors import invoices_held
from payments.models import BankTransfer, CashEntry, Payment, PaymentState, TransferState
from payments.selectors import teams_overdue
from rentals.models import Allocation, ImpairedSpan, LedgerEntry, LedgerKind
from rentals.sql import holdings as holdings_sql
from telemetry.agents import agent_silent_after
from telemetry.models import Flag, FlagKind, GpuSample, IngestMark, NodeAgent, Poll, PollOutcome

RECENT = timedelta(minutes=5)


class ConsoleCollector:
    """Fleet, health, flags, money, polling and the task queue, as of this scrape."""

    def collect(self):
        now = timezone.now()
        yield from self._fleet(now)
        yield from self._health()
        yield from self._money()
        yield from self._impaired()
        yield from self._invoices_held()
        yield from self._payments()
        yield from self._polls(now)
        yield from self._agents(now)
        yield from self._engine(now)
        yield from self._queues()

    @staticmethod
    def _agents(now):
        """Node agents by freshness, and the longest any live one has been silent."""
        nodes = GaugeMetricFamily(
            "anchorgpu_node_agents",
            "Active nodes by their agent: fresh (asked lately), silent, or none (no credential)",
            labels=["freshness"],
        )
        cutoff = now - agent_silent_after()
        live = NodeAgent.objects.filter(key_hash__isnull=False, node__state=NodeState.ACTIVE)
        counts = live.aggregate(
            fresh=Count("id", filter=Q(last_seen_at__gte=cutoff)),
            silent=Count("id", filter=Q(last_seen_at__lt=cutoff) | Q(last_seen_at__isnull=True)),
            oldest=Min("last_seen_at"),
        )
        active = Node.objects.filter(state=NodeState.ACTIVE).count()
        nodes.add_metric(["fresh"], counts["fresh"])
        nodes.add_metric(["silent"], counts["silent"])
        nodes.add_metric(["none"], active - counts["fresh"] - counts["silent"])
        yield nodes
        oldest = GaugeMetricFamily(
            "anchorgpu_node_agent_silence_seconds",
            "Seconds since the least recently seen live agent asked for its state",
        )
        if counts["oldest"] is not None:
            oldest.add_metric([], (now - counts["oldest"]).total_seconds())
        yield oldest

    @staticmethod
    def _engine(now):
        """With TELEMETRY_SOURCE=prometheus: whether the operator's engine answers, and how
        far behind now the least ingested node's samples are."""
        if settings.ANCHORGPU["TELEMETRY_SOURCE"] != "prometheus":
            return
        up = GaugeMetricFamily(
            "anchorgpu_telemetry_engine_up",
            "1 while the telemetry engine (PROMETHEUS_URL) answers, 0 while its flag is open",
        )
        down = Flag.objects.filter(kind=FlagKind.ENGINE_UNREACHABLE, closed_at__isnull=True)
        up.add_metric([], 0 if down.exists() else 1)
        yield up
        lag = GaugeMetricFamily(
            "anchorgpu_telemetry_ingest_lag_seconds",
            "Seconds between now and the least ingested active node's mark",
        )
        oldest = IngestMark.objects.filter(node__state=NodeState.ACTIVE).aggregate(
            oldest=Min("ingested_until")
        )["oldest"]
        if oldest is not None:
            lag.add_metric([], (now - oldest).total_seconds())
        yield lag

    @staticmethod
    def _fleet(now):
        labels = ["model", "region"]
        total = GaugeMetricFamily("anchorgpu_gpus", "GPUs on active nodes", labels=labels)
        allocated = GaugeMetricFamily(
            "anchorgpu_gpus_allocated", "GPUs held by a paid period now", labels=labels
        )
        busy = GaugeMetricFamily(
            "anchorgpu_gpus_busy", "GPUs over the activity threshold lately", labels=labels
        )
        reporting = GaugeMetricFamily(
            "anchorgpu_gpus_reporting",
            "GPUs whose telemetry answered lately (busy counts only these)",
            labels=labels,
        )
        keys = ("node__gpu_model__slug", "node__region__slug")
        # The nodes' GPU counts (Node.gpu_count, kept by the database's triggers): a sum over
        # the nodes, not a count over every GPU row.
        for row in (
            Node.objects.filter(state=NodeState.ACTIVE, gpu_count__gt=0)
            .values("gpu_model__slug", "region__slug")
            .annotate(n=Sum("gpu_count"))
        ):
            total.add_metric([row["gpu_model__slug"], row["region__slug"]], row["n"])
        with connection.cursor() as cursor:  # a maintenance window's are not allocated
            cursor.execute(holdings_sql.ALLOCATED_NOW, {"now": now})
            for model, region, n in cursor:
                allocated.add_metric([model, region], n)
        threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
        recent = now - timedelta(seconds=2 * settings.ANCHORGPU["POLL_INTERVAL"])
        for row in (
            GpuSample.objects.filter(at__gte=recent)
            .values(*(f"gpu__{k}" for k in keys))
            .annotate(
                answered=Count("gpu_id", distinct=True),
                busy=Count("gpu_id", distinct=True, filter=Q(utilization__gt=threshold)),
            )
        ):
            group = [row[f"gpu__{k}"] for k in keys]
            reporting.add_metric(group, row["answered"])
            if row["busy"]:
                busy.add_metric(group, row["busy"])
        yield from (total, allocated, busy, reporting)

    @staticmethod
    def _health():
        nodes = GaugeMetricFamily("anchorgpu_nodes", "Nodes by health", labels=["health"])
        for health, n in (
            Node.objects.exclude(state=NodeState.RETIRED)
            .values_list("health")
            .annotate(n=Count("id"))
            .values_list("health", "n")
        ):
            nodes.add_metric([health], n)
        flags = GaugeMetricFamily("anchorgpu_flags_open", "Open flags", labels=["kind", "severity"])
        for kind, severity, n in (
            Flag.objects.filter(closed_at__isnull=True)
            .values_list("kind", "severity")
            .annotate(n=Count("id"))
            .values_list("kind", "severity", "n")
        ):
            flags.add_metric([kind, severity], n)
        yield from (nodes, flags)

    @staticmethod
    def _money():
        bookings = CounterMetricFamily("anchorgpu_bookings", "Allocations booked")
        bookings.add_metric([], Allocation.objects.count())
        charged = CounterMetricFamily(
            "anchorgpu_charged", "Money charged, VAT included, per currency", labels=["currency"]
        )
        refunded = CounterMetricFamily(
            "anchorgpu_refunded", "Money refunded, per currency", labels=["currency"]
        )
        credited = CounterMetricFamily(
            "anchorgpu_credited", "Impaired time credited, per currency", labels=["currency"]
        )
        families = {LedgerKind.CHARGE: charged, LedgerKind.REFUND: refunded,
                    LedgerKind.CREDIT: credited}  # fmt: skip
        # One pass over the ledger for the three (it grows with the history, not the fleet).
        for kind, currency, amount in (
            LedgerEntry.objects.filter(kind__in=families)
            .values_list("kind", "currency")
            .annotate(s=Sum("amount"))
            .values_list("kind", "currency", "s")
            .order_by("kind", "currency")
        ):
            families[kind].add_metric([currency], float(amount))
        yield from (bookings, charged, refunded, credited)

    @staticmethod
    def _payments():
        """Getting paid: card payments by state, cash received and refunded, transfers
        waiting for staff, invoiced teams with an overdue invoice."""
        states = GaugeMetricFamily(
            "anchorgpu_card_payments", "Card payments by state", labels=["state"]
        )
        counted = dict(Payment.objects.values_list("state").annotate(n=Count("id")))
        for state in PaymentState:
            states.add_metric([state.value], counted.get(state.value, 0))
        cash = CounterMetricFamily(
            "anchorgpu_cash",
            "Money received and refunded, per currency",
            labels=["kind", "currency"],
        )
        for kind, currency, amount in (
            CashEntry.objects.values_list("kind", "currency")
            .annotate(s=Sum("amount"))
            .values_list("kind", "currency", "s")
            .order_by("kind", "currency")
        ):
            cash.add_metric([kind, currency], float(amount))
        unmatched = GaugeMetricFamily(
            "anchorgpu_transfers_unmatched", "Bank transfers waiting for staff to match them"
        )
        unmatched.add_metric([], BankTransfer.objects.filter(state=TransferState.UNMATCHED).count())
        overdue = GaugeMetricFamily(
            "anchorgpu_teams_overdue", "Invoiced teams with an invoice past its due date"
        )
        overdue.add_metric([], len(teams_overdue()))
        yield from (states, cash, unmatched, overdue)

    @staticmethod
    def _impaired():
        """Allocations marked impaired now, their GPUs that cannot work, and spans waiting for
        a remedy (ended, not credited)."""
        impaired = GaugeMetricFamily(
            "anchorgpu_allocations_impaired", "Allocations with held GPUs that cannot work now"
        )
        gpus = GaugeMetricFamily(
            "anchorgpu_impaired_gpus", "Held GPUs that cannot work now (open impaired spans)"
        )
        waiting = GaugeMetricFamily(
            "anchorgpu_impaired_spans_uncredited", "Ended impaired spans not yet credited"
        )
        open_spans = ImpairedSpan.objects.filter(ended_at__isnull=True)
        impaired.add_metric([], Allocation.objects.filter(impaired_since__isnull=False).count())
        gpus.add_metric([], sum(len(g) for g in open_spans.values_list("gpus", flat=True)))
        waiting.add_metric(
            [],
            ImpairedSpan.objects.counted()
            .filter(ended_at__isnull=False, credits__isnull=True)
            .count(),
        )
        yield from (impaired, gpus, waiting)

    @staticmethod
    def _invoices_held():
        """Invoices held for want of an exchange rate, per currency: alert on any above 0."""
        held = GaugeMetricFamily(
            "anchorgpu_invoices_held",
            "Charges whose invoice waits for an exchange rate of a day before the sale",
            labels=["currency"],
        )
        totals: dict[str, int] = {}
        for day in invoices_held():
            totals[day.currency] = totals.get(day.currency, 0) + day.invoices
        for currency, count in sorted(totals.items()):
            held.add_metric([currency], count)
        yield held

    @staticmethod
    def _polls(now):
        outcomes = GaugeMetricFamily(
            "anchorgpu_polls_recent", "Node polls in the last 5 minutes", labels=["outcome"]
        )
        duration = GaugeMetricFamily(
            "anchorgpu_poll_duration_seconds_recent",
            "Node poll durations in the last 5 minutes",
            labels=["stat"],
        )
        # One pass over the last minutes' polls (telemetry_poll_at) for all three families.
        per_outcome = list(
            Poll.objects.filter(at__gte=now - RECENT)
            .values_list("outcome")
            .annotate(n=Count("id"), total_ms=Sum("duration_ms"), max_ms=Max("duration_ms"))
            .values_list("outcome", "n", "total_ms", "max_ms")
            .order_by("outcome")
        )
        for outcome, n, _total, _max in per_outcome:
            outcomes.add_metric([outcome], n)
        polls = sum(n for _o, n, _t, _m in per_outcome)
        total_ms = sum(total for _o, _n, total, _m in per_outcome)
        duration.add_metric(["avg"], total_ms / polls / 1000 if polls else 0)
        duration.add_metric(["max"], max((m for *_, m in per_outcome), default=0) / 1000)
        failures = GaugeMetricFamily(
            "anchorgpu_poll_failures_recent", "Failed node polls in the last 5 minutes"
        )
        answered = (PollOutcome.OK, PollOutcome.DEGRADED)
        failures.add_metric([], sum(n for o, n, _t, _m in per_outcome if o not in answered))
        yield from (outcomes, duration, failures)

    @staticmethod
    def _queues():
        depth = GaugeMetricFamily(
            "anchorgpu_celery_queue_depth", "Tasks waiting in each queue", labels=["queue"]
        )
        try:
            client = cache._cache.get_client(write=False)
            for queue in settings.WORKER_QUEUES:
                depth.add_metric([queue], client.llen(queue))
        except Exception:  # Redis down: the family is empty, the scrape still answers
            pass
        yield depth


def _allowed(request) -> bool:
    secret = settings.ANCHORGPU["METRICS_TOKEN"]
    header = authentication.get_authorization_header(request).split()
    bearer = len(header) == 2 and header[0].lower() == b"bearer"
    if secret and bearer and constant_time_compare(header[1], secret.encode()):
        return True
    try:
        found = BearerTokenAuthentication().authenticate(request)
    except exceptions.AuthenticationFailed:
        return False
    user = found[0] if found else request.user
    return bool(user and user.is_authenticated and user.is_staff)


@require_GET
@never_cache
def metrics(request):
    if not _allowed(request):
        response = HttpResponse("staff token or the metrics token required\n", status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConsoleCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
