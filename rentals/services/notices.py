"""Expiry notices: recorded where they are decided, e-mailed after that transaction commits.

Recording takes row locks; sending a mail never happens under them. A notice is claimed
before it is sent and marked sent after, so a failed send is retried and a sent one is
never sent again (a worker that dies between the send and the mark is the one case that
can repeat a mail: at least once, never silently lost). Their words are in rentals/texts.py,
their reads in rentals/selectors/notices.py.
"""

from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce

from core.db import db_now, lease_free
from core.publish import publish
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationState,
    Notice,
    NoticeKind,
    Quote,
)
from rentals.selectors.notices import notice_get
from rentals.signals import allocation_notices_recorded
from rentals.texts import notice_subject, notice_text, reader_preferences

SEND_TASK = "rentals.tasks.notice_send_task"
CLAIM = timedelta(minutes=5)  # longer than EMAIL_TIMEOUT: an expired claim means a dead sender
BATCH = 500

WARNINGS = (
    (NoticeKind.EXPIRY_24H, "warned_24h_at", timedelta(hours=24)),
    (NoticeKind.EXPIRY_1H, "warned_1h_at", timedelta(hours=1)),
)


def expiry_notices_record(*, now: datetime | None = None) -> int:
    """Record the 24 h and 1 h warnings that are due, once each, and queue their mails.

    A warning is skipped (and marked done) for a rental booked closer to its end than the
    warning's lead time: a one-day rental needs no "ends within 24 hours" right after booking.
    """
    now = now or db_now()
    recorded = 0
    for kind, field, ahead in WARNINGS:
        while (due := _expiry_batch_record(kind, field, ahead, now)) is not None:
            recorded += due
    return recorded


@transaction.atomic
def _expiry_batch_record(kind: str, field: str, ahead: timedelta, now: datetime) -> int | None:
    """One batch of one warning, in a transaction of its own: how many were recorded, or
    None when none was left to decide."""
    # The allocations' rows only, by a lock that rows pointing at them (events, notices)
    # can commit beside: skipped means another sweep holds it.
    batch = list(
        Allocation.objects.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .filter(
            state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
            paid_until__gt=now,
            paid_until__lte=now + ahead,
            **{f"{field}__isnull": True},
        )
        .select_related("user")[:BATCH]
    )
    if not batch:
        return None
    due = _one_per_cluster([a for a in batch if a.paid_until - a.created_at > ahead])
    notices = Notice.objects.bulk_create(
        Notice(user=a.user, allocation=a, kind=kind, ends_at=a.paid_until, created_at=now)
        for a in due
    )
    updates: dict[str, datetime | Combinable] = {field: now}
    if kind == NoticeKind.EXPIRY_1H:  # a 24 h warning is pointless after this one
        updates["warned_24h_at"] = Coalesce(F("warned_24h_at"), now)
    Allocation.objects.filter(pk__in=[a.pk for a in batch]).update(**updates)
    if notices:
        allocation_notices_recorded.send(sender=Notice, notice_ids=[n.pk for n in notices])
    mailed = [n.pk for n, a in zip(notices, due, strict=True) if a.user.email]
    transaction.on_commit(lambda: notices_queue(mailed))
    return len(due)


def _one_per_cluster(allocations: list[Allocation]) -> list[Allocation]:
    """A cluster's nodes end together: one warning for the cluster, on its first node (the
    others are marked warned all the same)."""
    clusters = {a.cluster_id for a in allocations if a.cluster_id}
    if not clusters:
        return allocations
    first: dict[UUID, UUID] = {}
    for cluster_id, pk in Allocation.objects.filter(cluster_id__in=clusters).values_list(
        "cluster_id", "pk"
    ):
        first[cluster_id] = min(pk, first.get(cluster_id, pk))
    return [a for a in allocations if not a.cluster_id or a.pk == first[a.cluster_id]]


def notices_queue(notice_ids: list[int]) -> None:
    """Mail them soon; what cannot be queued now the unsent-notices sweep sends."""
    publish(SEND_TASK, notice_ids)


def notice_send(*, notice_id: int) -> bool:
    """E-mail one notice unless it was sent or another worker is sending it. Raises when
    the mail server fails, after releasing the claim, so the task retries."""
    now = db_now()
    claimed = (
        Notice.objects.filter(pk=notice_id, sent_at__isnull=True)
        .filter(lease_free(now))
        .update(claimed_until=now + CLAIM, attempts=F("attempts") + 1)
    )
    if not claimed:
        return False
    notice = notice_get(pk=notice_id)
    try:
        with reader_preferences(notice.user):
            subject, body = notice_subject(notice), notice_text(notice)
        send_mail(
            subject=subject, message=body, from_email=None, recipient_list=[notice.user.email]
        )
    except Exception as exc:  # any failure of the mail server: release and let the task retry
        Notice.objects.filter(pk=notice_id).update(
            claimed_until=None, last_error=f"{type(exc).__name__}: {exc}"[:300]
        )
        raise
    Notice.objects.filter(pk=notice_id).update(sent_at=db_now(), last_error="")
    return True


def receipt_record(*, allocation: Allocation, quote: Quote, kind: str, at: datetime) -> Notice:
    """A receipt for a charge, to the allocation's owner: recorded in the charge's own
    transaction, mailed once it commits, shown in the console either way."""
    notice = Notice.objects.create(
        user=allocation.user, allocation=allocation, kind=kind, quote=quote,
        ends_at=allocation.paid_until, created_at=at,
    )  # fmt: skip
    receipt_mail(notice)
    return notice


def receipt_mail(notice: Notice) -> None:
    """Mail a receipt just recorded once its transaction commits, to an owner with an
    address."""
    if notice.user.email:
        transaction.on_commit(lambda: notices_queue([notice.pk]))


@transaction.atomic
def stopped_notices_record(*, now: datetime | None = None) -> int:
    """Tell owners once per paid period when an allocation has been stopped longer than
    NOTICE_STOPPED_HOURS while still paid (0 turns this off)."""
    hours = settings.ANCHORGPU["NOTICE_STOPPED_HOURS"]
    if not hours:
        return 0
    now = now or db_now()
    stopped_since = (
        AllocationEvent.objects.filter(allocation=OuterRef("pk"), to_state=AllocationState.STOPPED)
        .order_by("-at")
        .values("at")[:1]
    )
    due = list(
        Allocation.objects.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .filter(state=AllocationState.STOPPED, paid_until__gt=now)
        .annotate(stopped_at=Subquery(stopped_since))
        .filter(stopped_at__lte=now - timedelta(hours=hours))
        .exclude(
            Exists(
                Notice.objects.filter(
                    allocation=OuterRef("pk"),
                    kind=NoticeKind.STOPPED_WHILE_PAID,
                    ends_at=OuterRef("paid_until"),
                )
            )
        )
        .select_related("user")[:BATCH]
    )
    notices = Notice.objects.bulk_create(
        Notice(
            user=a.user, allocation=a, kind=NoticeKind.STOPPED_WHILE_PAID,
            ends_at=a.paid_until, created_at=now,
        )
        for a in due
    )  # fmt: skip
    mailed = [n.pk for n, a in zip(notices, due, strict=True) if a.user.email]
    transaction.on_commit(lambda: notices_queue(mailed))
    return len(notices)


def notices_mark_read(*, user: User) -> int:
    return Notice.objects.filter(user=user, read_at__isnull=True).update(read_at=db_now())


def notices_unsent(
    *, now: datetime | None = None, older_than: timedelta = timedelta(minutes=1)
) -> list[int]:
    """Notices whose mail is still owed (a queueing lost with a broker outage, retries spent)."""
    now = now or db_now()
    return list(
        Notice.objects.filter(sent_at__isnull=True, created_at__lte=now - older_than)
        .exclude(user__email="")
        .filter(lease_free(now))
        .values_list("pk", flat=True)[:BATCH]
    )


def webhook_disabled_notice_record(*, user: User, url: str, at: datetime) -> Notice:
    """Tell the endpoint's owner in the console (and by mail) that it was disabled."""
    notice = Notice.objects.create(
        user=user, kind=NoticeKind.WEBHOOK_DISABLED, endpoint_url=url, ends_at=at, created_at=at
    )
    if user.email:
        transaction.on_commit(lambda: notices_queue([notice.pk]))
    return notice
