"""How a time range is read: whole buckets of the coarsest rolled-up level, finer edges."""

from datetime import UTC, datetime, timedelta

from telemetry.selectors import _LEVELS, _plan

T = datetime(2026, 11, 1, tzinfo=UTC)
MINUTE, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)


def _levels(day, hour, minute):
    return [(b, u, r) for (b, u), r in zip(_LEVELS, (day, hour, minute), strict=True)]


def test_a_long_range_reads_days_then_hours_then_minutes_then_raw():
    start = T + 10 * HOUR + 30 * MINUTE + timedelta(seconds=20)
    end = T + 5 * DAY + 2 * HOUR + 7 * MINUTE + timedelta(seconds=40)
    minutes_rolled = T + 5 * DAY + 2 * HOUR + 6 * MINUTE
    parts = _plan(start, end, _levels(T + 5 * DAY, T + 5 * DAY + 2 * HOUR, minutes_rolled))
    assert parts == [
        ("raw", start, T + 10 * HOUR + 31 * MINUTE),
        ("minute", T + 10 * HOUR + 31 * MINUTE, T + 11 * HOUR),
        ("hour", T + 11 * HOUR, T + DAY),
        ("day", T + DAY, T + 5 * DAY),
        ("hour", T + 5 * DAY, T + 5 * DAY + 2 * HOUR),
        ("minute", T + 5 * DAY + 2 * HOUR, T + 5 * DAY + 2 * HOUR + 6 * MINUTE),
        ("raw", T + 5 * DAY + 2 * HOUR + 6 * MINUTE, end),
    ]
    # the parts tile the range: nothing counted twice, nothing left out
    assert all(a[2] == b[1] for a, b in zip(parts, parts[1:], strict=False))


def test_nothing_rolled_up_yet_reads_raw_samples():
    assert _plan(T, T + 3 * HOUR, _levels(None, None, None)) == [("raw", T, T + 3 * HOUR)]
