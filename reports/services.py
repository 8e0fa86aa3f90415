"""The fleet report's closed steps, each written once (`reports.models.AllocatedStep`,
`reports.models.LedgerDay`)."""

import logging
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max

from core.db import db_now
from reports import sql
from reports.models import AllocatedStep, Step
from telemetry.models import RollupBucket
from telemetry.rollup import STEP, bucket_floor

logger = logging.getLogger(__name__)

# How far back a first run starts: the fleet report's longest range (90 days) and the step its
# start falls in. Older steps are counted from the holdings when read, as before.
CLOSED_STEPS_BACK = timedelta(days=91)


@transaction.atomic
def allocated_steps_close(*, now: datetime | None = None) -> dict[str, int]:
    """Write the GPUs allocated in each hour and day closed since the newest one written (on
    a first run, from CLOSED_STEPS_BACK ago), and each such day's ledger sums; back: the
    steps written per bucket. A step is closed when it ended before `now` and before every
    open transaction began (`reports.sql.STEPS_HORIZON`), so no booking still to commit can add
    to it."""
    written: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql.ACTIVITY_FRESH)
        cursor.execute(sql.STEPS_HORIZON, {"now": now or db_now()})
        horizon = cursor.fetchone()[0]
        if horizon is None:
            logger.warning(
                "Fleet report steps not closed: a session of another database role is connected, "
                "and this role cannot see its transactions (grant it pg_read_all_stats)."
            )
            return {bucket: 0 for bucket in Step}
        for bucket in Step:
            step = STEP[RollupBucket(bucket)]  # a Step is the rollup bucket of its name
            newest = AllocatedStep.objects.filter(bucket=bucket).aggregate(at=Max("at"))["at"]
            first = newest + step if newest else bucket_floor(horizon - CLOSED_STEPS_BACK, bucket)
            end = bucket_floor(horizon, bucket)  # the open step's start
            written[bucket] = 0
            if first < end:
                cursor.execute(
                    sql.ALLOCATED_STEPS_CLOSE,
                    {"unit": bucket, "step": f"1 {bucket}", "start": first, "end": end - step},
                )
                written[bucket] = cursor.rowcount
                if bucket == Step.DAY:
                    cursor.execute(
                        sql.LEDGER_DAYS_CLOSE,
                        {"unit": bucket, "start": first, "end": end},
                    )
    return written
