"""Words for stored facts, in the active language.

Quote lines and ledger rows keep facts (kind, model, count, periods, option), never
sentences, so a Polish reader sees Polish lines for a quote an English-speaking script
made. Pages, the API, CSV and e-mails all call these, under the reader's language
(`reader_preferences` where there is no request: e-mails).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta

from django.contrib.auth.models import User
from django.db.models import Sum
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from accounts.selectors import profile_for
from catalog.models import RentalPeriod
from core.dates import when_text
from core.money import money_text
from rentals.access import connection_details, tenant_login
from rentals.models import (
    MAINTENANCE_NOTICES,
    RECEIPTS,
    SPAN_NOTICES,
    Allocation,
    ImpairedSpan,
    LedgerEntry,
    LedgerKind,
    LedgerReason,
    Notice,
    NoticeKind,
    Quote,
    QuoteLine,
    QuoteLineKind,
    impaired_minimum,
    span_counts,
)

# The fixed periods get real plurals (Polish has three forms); an admin's own period is
# shown as "3 × name".
_PERIOD_WORDS = {
    "day": lambda n: ngettext("%(n)s day", "%(n)s days", n),
    "week": lambda n: ngettext("%(n)s week", "%(n)s weeks", n),
    "month": lambda n: ngettext("%(n)s month", "%(n)s months", n),
}


def periods_text(period: RentalPeriod, n: int) -> str:
    """ "3 weeks", "3 tygodnie", or "3 × sprint" for a period without a plural of its own."""
    words = _PERIOD_WORDS.get(period.slug)
    if words is None:
        return f"{n} × {period.name}"
    return words(n) % {"n": n}


def quote_line_text(line: QuoteLine) -> str:
    """ "2 × H100 80GB for 3 weeks", "Extra storage: 2 TB for 3 weeks", "Setup: 1 unit (one-time)"."""
    quote = line.quote
    if line.kind == QuoteLineKind.GPU:
        assert line.periods is not None  # rentals_quoteline_facts_match_kind
        return _("%(count)s × %(model)s for %(periods)s") % {
            "count": line.count,
            "model": quote.gpu_model.name,
            "periods": periods_text(quote.period, line.periods),
        }
    option = line.option
    assert option is not None  # rentals_quoteline_facts_match_kind
    facts = {"option": option.name, "count": line.count, "unit": option.unit}
    if line.periods is None:
        text = _("%(option)s: %(count)s %(unit)s (one-time)") % facts
    else:
        text = _("%(option)s: %(count)s %(unit)s for %(periods)s") % {
            **facts,
            "periods": periods_text(quote.period, line.periods),
        }
    return f"{text} — {line.note}" if line.note else text  # what the customer said


def ledger_entry_text(entry: LedgerEntry) -> str:
    """ "Booking: 2 × H100 80GB for 3 weeks", "Extension: …", "Refund: cancelled before the start"."""
    span = entry.impaired_span if entry.reason == LedgerReason.IMPAIRMENT else None
    allocation = entry.allocation if entry.allocation_id else None
    return ledger_text(
        entry.reason,
        period_count=entry.period_count,
        span=(span.started_at, span.ended_at) if span else None,
        gpu_count=allocation.gpu_count if allocation else 0,
        model=allocation.gpu_model.name if allocation else "",
        period=allocation.period if allocation else None,
        cluster_nodes=allocation.cluster.node_count if allocation and allocation.cluster else 0,
    )


def ledger_text(
    reason: str, *, period_count: int | None, span: tuple[datetime | None, datetime | None] | None,
    gpu_count: int, model: str, period: RentalPeriod | None, cluster_nodes: int,
) -> str:  # fmt: skip
    """A ledger row's words from its facts (`ledger_entry_text` for a row with its
    allocation loaded; the statement's CSV passes the facts as it reads them)."""
    if reason == LedgerReason.CANCELLATION:
        return _("Refund: cancelled before the start")
    if reason == LedgerReason.IMPAIRMENT:
        started, ended = span or (None, None)
        assert started is not None and ended is not None  # a credit's span, which had ended
        return _("Credit: impaired GPUs from %(from)s to %(until)s") % {
            "from": when_text(started),
            "until": when_text(ended),
        }
    # a charge's row: its allocation's period and its count (rentals_ledgerentry_reason_matches_kind)
    assert period is not None and period_count is not None
    facts: dict[str, object] = {
        "count": gpu_count,
        "model": model,
        "periods": periods_text(period, period_count),
    }
    if cluster_nodes:  # one charge for every node: count them all
        facts |= {"nodes": cluster_nodes, "total": gpu_count * cluster_nodes}
        if reason == LedgerReason.EXTENSION:
            return (
                _(
                    "Cluster extension: %(nodes)s nodes × %(count)s %(model)s (%(total)s GPUs) "
                    "for %(periods)s"
                )
                % facts
            )
        return (
            _(
                "Cluster booking: %(nodes)s nodes × %(count)s %(model)s (%(total)s GPUs) for "
                "%(periods)s"
            )
            % facts
        )
    if reason == LedgerReason.EXTENSION:
        return _("Extension: %(count)s × %(model)s for %(periods)s") % facts
    return _("Booking: %(count)s × %(model)s for %(periods)s") % facts


def access_words(state: str) -> tuple[str, str]:
    """(label, explanation) of an allocation's access state (rentals.access)."""
    return {
        "scheduled": (
            _("not yet"),
            _("The node lets your keys in once the paid period starts."),
        ),
        "pending": (
            _("getting ready"),
            _("The node's agent has not applied this yet; it looks every few seconds."),
        ),
        "ready": (_("ready"), _("Log in with one of the keys below.")),
        "revoking": (
            _("closing"),
            _("The node's agent has yet to take access away."),
        ),
        "revoked": (
            _("closed"),
            _(
                "Nobody can log in: the allocation is stopped or has ended. Start it to log in again."
            ),
        ),
    }[state]


@contextmanager
def reader_preferences(user: User) -> Iterator[None]:
    """Words and times in the reader's own language and time zone (e-mails: no request)."""
    profile = profile_for(user=user)
    with translation.override(profile.language or None), timezone.override(profile.time_zone):
        yield


def _allocation_of(notice: Notice) -> Allocation:
    """Every notice but a disabled webhook's names its allocation
    (rentals_notice_about_an_allocation_or_an_endpoint)."""
    assert notice.allocation is not None
    return notice.allocation


def _quote_of(notice: Notice) -> Quote:
    """A receipt names its quote (rentals_notice_receipts_have_a_quote)."""
    assert notice.quote is not None
    return notice.quote


def notice_subject(notice: Notice) -> str:
    """The notice's headline in the active language, from its facts."""
    if notice.kind == NoticeKind.WEBHOOK_DISABLED:
        return _("AnchorGPU disabled a webhook endpoint that failed for a day")
    if notice.kind == NoticeKind.EXPORT_READY:
        return _("Your AnchorGPU statement export is ready")
    # A receipt counts what was charged: a cluster's GPUs on every node.
    allocation = _allocation_of(notice)
    count = notice.quote.gpu_count if notice.quote is not None else allocation.gpu_count
    facts = {"count": count, "model": allocation.gpu_model.name}
    if notice.kind == NoticeKind.BOOKED:
        return _("AnchorGPU booking confirmed: %(count)s × %(model)s") % facts
    if notice.kind == NoticeKind.REFUNDED:
        return _("AnchorGPU booking cancelled and refunded: %(count)s × %(model)s") % facts
    if notice.kind == NoticeKind.EXTENDED:
        return _("AnchorGPU extension confirmed: %(count)s × %(model)s") % facts
    if notice.kind == NoticeKind.STOPPED_WHILE_PAID:
        return _("Your stopped AnchorGPU allocation is still being paid for")
    if notice.kind == NoticeKind.ACCESS_READY:
        return _("Your AnchorGPU GPUs are ready: %(count)s × %(model)s") % facts
    if notice.kind == NoticeKind.MAINTENANCE_MOVED:
        return _("Maintenance: your AnchorGPU allocation moved to other GPUs")
    if notice.kind == NoticeKind.MAINTENANCE_CANCELLED:
        return _("Maintenance: your AnchorGPU booking was cancelled and refunded")
    if notice.kind == NoticeKind.IMPAIRED:
        return _("Some GPUs of your AnchorGPU allocation cannot work")
    if notice.kind == NoticeKind.RECOVERED:
        return _("The GPUs of your AnchorGPU allocation work again")
    if notice.kind == NoticeKind.CREDITED:
        return _("AnchorGPU credited the impaired time of your allocation")
    return _("Your AnchorGPU allocation ends at %(at)s") % {"at": when_text(notice.ends_at)}


def notice_text(notice: Notice) -> str:
    """The notice's text in the active language (pages, e-mails), from its facts."""
    if notice.kind in RECEIPTS:
        return _receipt_text(notice)
    if notice.kind == NoticeKind.WEBHOOK_DISABLED:
        return _(
            "Deliveries to %(url)s failed for a day, so the endpoint was disabled at %(at)s. "
            "Fix the receiver, then enable the endpoint again on the account page; events "
            "from the time it was disabled are not sent."
        ) % {"url": notice.endpoint_url, "at": when_text(notice.created_at)}
    if notice.kind == NoticeKind.EXPORT_READY:
        return _export_text(notice)
    allocation = _allocation_of(notice)
    facts: dict[str, object] = {
        "count": allocation.gpu_count,
        "model": allocation.gpu_model.name,
        "at": when_text(notice.ends_at),
    }
    if notice.kind == NoticeKind.ACCESS_READY:
        details = connection_details(allocation.node, tenant_login(allocation.pk))
        return _(
            "Your %(count)s × %(model)s allocation on %(node)s is ready to log in to with "
            "the SSH keys you chose: %(command)s (paid until %(at)s)."
        ) % {**facts, "node": allocation.node.hostname, "command": details["ssh_command"]}
    if notice.kind in MAINTENANCE_NOTICES:
        return _maintenance_text(notice, facts)
    if notice.kind in SPAN_NOTICES:
        return _span_text(notice, facts)
    if notice.kind != NoticeKind.STOPPED_WHILE_PAID and allocation.cluster_id:
        return _(
            "Your cluster of %(nodes)s × %(model)s nodes (%(count)s GPUs) is paid until "
            "%(at)s. Extend it before then to keep the same nodes."
        ) % {**facts, "nodes": allocation.quote.node_count, "count": allocation.quote.gpu_count}
    if notice.kind == NoticeKind.STOPPED_WHILE_PAID:
        return (
            _(
                "Your %(count)s × %(model)s allocation is stopped, and stopping does not pause "
                "the paid period: it is paid until %(at)s. Start it to use the time, or "
                "let it run out."
            )
            % facts
        )
    return (
        _(
            "Your %(count)s × %(model)s allocation's paid period ends at "
            "%(at)s. Extend it before then to keep the same GPUs."
        )
        % facts
    )


def _maintenance_text(notice: Notice, facts: dict[str, object]) -> str:
    """What a maintenance window did to the allocation, with the window's times and reason."""
    window = notice.maintenance
    assert window is not None  # rentals_notice_maintenance_names_its_window
    facts = {
        **facts, "from": when_text(window.starts_at), "until": when_text(window.ends_at),
        "reason": window.reason, "node": _allocation_of(notice).node.hostname,
    }  # fmt: skip
    if notice.kind == NoticeKind.MAINTENANCE_CANCELLED:
        return (
            _(
                "Maintenance from %(from)s to %(until)s (%(reason)s) takes the GPUs your "
                "%(count)s × %(model)s booking was to use, so it was cancelled before its start "
                "and refunded in full."
            )
            % facts
        )
    return (
        _(
            "Maintenance from %(from)s to %(until)s (%(reason)s) takes GPUs your %(count)s × "
            "%(model)s allocation held, so it was moved to equivalent GPUs on %(node)s, with "
            "the same paid period (until %(at)s) and price. If it was running, log in again: "
            "the ssh command on its page names the node."
        )
        % facts
    )


def _span_text(notice: Notice, facts: dict[str, object]) -> str:
    """An impaired span's notice: since when the GPUs cannot work, or what was credited."""
    span = notice.impaired_span
    assert span is not None  # rentals_notice_span_names_its_span
    facts = {**facts, "since": when_text(span.started_at), "n": len(span.gpus)}
    if notice.kind == NoticeKind.CREDITED:
        assert span.ended_at is not None  # only an ended span is credited
        credit = span.credits.first()
        return _(
            "The GPUs of your %(count)s × %(model)s allocation could not work from %(since)s "
            "to %(until)s. AnchorGPU credited that time: %(amount)s, in your statement."
        ) % {
            **facts,
            "until": when_text(span.ended_at),
            "amount": money_text(credit.amount, credit.currency) if credit else "",
        }
    if notice.kind == NoticeKind.RECOVERED:
        return _recovered_text(notice, span, facts)
    return (
        _(
            "Since %(since)s, %(n)s of the %(count)s %(model)s GPUs of your allocation cannot "
            "work (a fault on our side). The paid period stays as it is (until %(at)s); we "
            "replace the GPUs or credit the impaired time, and tell you which."
        )
        % facts
    )


def minutes_text(duration: timedelta) -> str:
    """ "5 minutes", "90 seconds": a setting's duration in words."""
    seconds = int(duration.total_seconds())
    if seconds % 60 == 0:
        return ngettext("%(n)s minute", "%(n)s minutes", seconds // 60) % {"n": seconds // 60}
    return ngettext("%(n)s second", "%(n)s seconds", seconds) % {"n": seconds}


def _recovered_text(notice: Notice, span: ImpairedSpan, facts: dict[str, object]) -> str:
    """The all-clear: since when the GPUs work again, and whether the span is impaired time
    (spans shorter than IMPAIRED_MIN_SECONDS are not)."""
    assert span.ended_at is not None  # the all-clear is told when its span ends
    facts = {
        **facts, "until": when_text(span.ended_at), "node": _allocation_of(notice).node.hostname,
        "minutes": minutes_text(impaired_minimum()),
    }  # fmt: skip
    head = (
        _(
            "The GPUs of your %(count)s × %(model)s allocation work again since %(until)s, on "
            "%(node)s; %(n)s of them could not work from %(since)s. The paid period stays as it "
            "is (until %(at)s)."
        )
        % facts
    )
    if not span_counts(span):
        tail = (
            _(
                "It lasted less than %(minutes)s, which is not counted as impaired time: "
                "there is nothing to credit."
            )
            % facts
        )
    else:
        tail = _("We credit the impaired time and tell you when we have.")
    return f"{head} {tail}"


def _refund_text(notice: Notice) -> str:
    """What a cancel refunded: every charge of the allocation (a cluster's every node), the
    booking and any extension, from the ledger rows the cancel wrote."""
    allocation, quote = _allocation_of(notice), _quote_of(notice)
    members = allocation.cluster.allocations.all() if allocation.cluster else [allocation]
    refunded = LedgerEntry.objects.filter(
        allocation__in=members, kind=LedgerKind.REFUND, reason=LedgerReason.CANCELLATION
    ).aggregate(total=Sum("amount"))["total"]
    head = _(
        "Your booking of %(count)s × %(model)s, to be paid from %(from)s to %(until)s, was "
        "cancelled before its start and refunded in full."
    ) % {
        "count": quote.gpu_count, "model": allocation.gpu_model.name,
        "from": when_text(allocation.paid_from), "until": when_text(notice.ends_at),
    }  # fmt: skip
    total = _("Refunded: %(total)s") % {"total": money_text(refunded or 0, quote.currency)}
    return "\n".join([head, total])


def _receipt_text(notice: Notice) -> str:
    """What was charged, line by line as the customer's quote showed it, and the total."""
    if notice.kind == NoticeKind.REFUNDED:
        return _refund_text(notice)
    quote = _quote_of(notice)
    if notice.kind == NoticeKind.BOOKED:
        # The allocation's period: a quote "starting now" started when it was booked.
        head = _("Your booking is confirmed, paid from %(from)s to %(until)s.") % {
            "from": when_text(_allocation_of(notice).paid_from),
            "until": when_text(notice.ends_at),
        }
    else:
        head = _("Your extension is confirmed: the allocation is now paid until %(until)s.") % {
            "until": when_text(quote.paid_until)
        }
    lines = [
        f"{quote_line_text(line)}: {money_text(line.amount, quote.currency)}"
        for line in quote.lines.all()
    ]
    return "\n".join([head, *lines, *_receipt_sums(quote)])


def _receipt_sums(quote: Quote) -> list[str]:
    """Net, the VAT line and the gross charged, as the quote showed them (the lines above
    are net), with the legal words of a treatment that carries no VAT."""
    currency = quote.currency
    if quote.vat_rate:
        vat = _("VAT %(rate)s %%") % {"rate": quote.vat_percent}
    else:
        vat = f"{_('VAT')} ({quote.get_tax_treatment_display()})"
    sums = [
        _("Net: %(net)s") % {"net": money_text(quote.net_total, currency)},
        f"{vat}: {money_text(quote.vat_total, currency)}",
        _("Charged (gross): %(total)s") % {"total": money_text(quote.total, currency)},
    ]
    return [*sums, quote.tax_note] if quote.tax_note else sums


def export_range_text(since: date | None, until: date | None, kind: str) -> str:
    """A statement export's range and kind in words: "all entries", "refunds from … to …"."""
    what = LedgerKind(kind).label if kind else _("all entries")
    if since and until:
        return _("%(what)s from %(since)s to %(until)s") % {
            "what": what,
            "since": since.isoformat(),
            "until": until.isoformat(),
        }
    if since:
        return _("%(what)s from %(since)s") % {"what": what, "since": since.isoformat()}
    if until:
        return _("%(what)s until %(until)s") % {"what": what, "until": until.isoformat()}
    return str(what)


def _export_text(notice: Notice) -> str:
    export = notice.statement_export
    assert export is not None, "an export's notice names its export"
    facts = {
        "rows": export.rows,
        "range": export_range_text(export.since, export.until, export.kind),
        "at": when_text(notice.ends_at),
    }
    return (
        ngettext(
            "The CSV of your statement (%(range)s, %(rows)s row) is ready. Download it from the "
            "statement page until %(at)s; only the team's owners and billing members can.",
            "The CSV of your statement (%(range)s, %(rows)s rows) is ready. Download it from the "
            "statement page until %(at)s; only the team's owners and billing members can.",
            export.rows or 0,
        )
        % facts
    )
