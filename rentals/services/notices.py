"""Expiry notices: recorded where they are decided, e-mailed after that transaction commits.

Recording takes row locks; sending a mail never happens under them. A notice is claimed
before it is sent and marked sent after, so a failed send is retried and a sent one is
never sent again (a worker that dies between the send and the mark is the one case that
can repeat a mail: at least once, never silently lost).
"""

from datetime import datetime, timedelta

from celery import current_app
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _

from core.db import db_now
from rentals.models import Allocation, AllocationState, Notice, NoticeKind

SEND_TASK = "rentals.tasks.notice_send_task"
CLAIM = timedelta(minutes=5)  # longer than EMAIL_TIMEOUT: an expired claim means a dead sender
BATCH = 500

WARNINGS = (
    (NoticeKind.EXPIRY_24H, "warned_24h_at", timedelta(hours=24)),
    (NoticeKind.EXPIRY_1H, "warned_1h_at", timedelta(hours=1)),
)


def expiry_notices_record(*, now: datetime | None = None) -> int:
    """Record the 24 h and 1 h warnings that are due, once each, and queue their mails."""
    now = now or db_now()
    recorded = 0
    for kind, field, ahead in WARNINGS:
        while True:
            with transaction.atomic():
                batch = list(
                    Allocation.objects.select_for_update(skip_locked=True)
                    .filter(
                        state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
                        paid_until__gt=now,
                        paid_until__lte=now + ahead,
                        **{f"{field}__isnull": True},
                    )
                    .select_related("user")[:BATCH]
                )
                if not batch:
                    break
                notices = Notice.objects.bulk_create(
                    Notice(
                        user=a.user, allocation=a, kind=kind, ends_at=a.paid_until, created_at=now
                    )
                    for a in batch
                )
                updates = {field: now}
                if kind == NoticeKind.EXPIRY_1H:  # a 24 h warning is pointless after this one
                    updates["warned_24h_at"] = Coalesce(F("warned_24h_at"), now)
                Allocation.objects.filter(pk__in=[a.pk for a in batch]).update(**updates)
                mailed = [n.pk for n, a in zip(notices, batch, strict=True) if a.user.email]
                transaction.on_commit(lambda ids=mailed: _queue(ids))
                recorded += len(batch)
    return recorded


def _queue(notice_ids):
    for pk in notice_ids:
        current_app.send_task(SEND_TASK, args=[pk])


def notice_send(*, notice_id: int) -> bool:
    """E-mail one notice unless it was sent or another worker is sending it. Raises when
    the mail server fails, after releasing the claim, so the task retries."""
    now = db_now()
    claimed = (
        Notice.objects.filter(pk=notice_id, sent_at__isnull=True)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .update(claimed_until=now + CLAIM, attempts=F("attempts") + 1)
    )
    if not claimed:
        return False
    notice = Notice.objects.select_related("user", "allocation__gpu_model").get(pk=notice_id)
    allocation = notice.allocation
    at = notice.ends_at.strftime("%Y-%m-%d %H:%M")
    try:
        send_mail(
            subject=_("Your AnchorGPU allocation ends at %(at)s UTC") % {"at": at},
            message=_(
                "Your %(count)s × %(model)s allocation's paid period ends at "
                "%(at)s UTC. Extend it before then to keep the same GPUs."
            )
            % {"count": allocation.gpu_count, "model": allocation.gpu_model.name, "at": at},
            from_email=None,
            recipient_list=[notice.user.email],
        )
    except Exception as exc:  # any failure of the mail server: release and let the task retry
        Notice.objects.filter(pk=notice_id).update(
            claimed_until=None, last_error=f"{type(exc).__name__}: {exc}"[:300]
        )
        raise
    Notice.objects.filter(pk=notice_id).update(sent_at=timezone.now(), last_error="")
    return True


def notices_unsent(*, now: datetime | None = None, older_than=timedelta(minutes=1)) -> list[int]:
    """Notices whose mail is still owed (a queueing lost with a broker outage, retries spent)."""
    now = now or db_now()
    return list(
        Notice.objects.filter(sent_at__isnull=True, created_at__lte=now - older_than)
        .exclude(user__email="")
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        .values_list("pk", flat=True)[:BATCH]
    )
