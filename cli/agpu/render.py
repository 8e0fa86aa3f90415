"""What agpu prints for people: Rich tables on stdout; notes, questions, progress and
errors on stderr (so `--json` output and tables can be piped while the words still show).
Figures are the API's own strings: amounts are shown exactly (only trailing zeros past the
currency's minor units are dropped), with the language's separators; times in UTC."""

import json
import sys
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from agpu.i18n import language, tr, trc

# No markup, emoji codes or highlighting: names, descriptions and messages from the API are
# printed as they are, whatever brackets or colons they hold. Words on stderr are never
# wrapped (scripts and logs read them whole).
out = Console(highlight=False, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)

# Minor units where they are not 2 (ISO 4217): amounts never lose a digit, only zeros.
MINOR_UNITS = {
    **dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF",
                     "UGX", "VND", "VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
}  # fmt: skip


def print_json(data) -> None:
    """The API's objects as they are."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def number(value, places: int | None = None) -> str:
    """A decimal string in the reader's language: 1,296.00 or 1 296,00."""
    if value is None:
        return "—"
    try:
        exact = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    if places is not None:
        exponent = exact.as_tuple().exponent
        if isinstance(exponent, int) and -exponent > places:
            trimmed = exact.quantize(Decimal(1).scaleb(-places))
            if trimmed == exact:  # only zeros go
                exact = trimmed
    text = f"{exact:,f}"
    if language() == "pl":
        text = text.replace(",", "\u00a0").replace(".", ",")
    return text


def measure(value, places: int, unit: str) -> str:
    """A measured figure (a float from the API: hours, %, kWh) to `places` decimals, with
    trailing zeros dropped: 24 h, 0.5 h, 12.25 %."""
    if value is None:
        return "—"
    text = f"{value:.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{number(text)} {unit}"


def money(amount, currency: str | None) -> str:
    if amount is None:
        return "—"
    places = MINOR_UNITS.get(currency or "", 2)
    return f"{number(amount, places)} {currency or ''}".strip()


def percent(rate) -> str:
    """ "0.2300" → "23 %"."""
    try:
        value = (Decimal(str(rate)) * 100).normalize()
    except InvalidOperation:
        return str(rate)
    return f"{number(format(value, 'f'))} %"


def when(value) -> str:
    """An API time (ISO 8601, UTC) as "2026-12-05 14:03 UTC"."""
    if not value:
        return "—"
    try:
        at = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def short(identifier: str | None) -> str:
    return (identifier or "")[:8]


STATE_STYLE = {
    "running": "green",
    "scheduled": "cyan",
    "stopped": "yellow",
    "expired": "dim",
    "cancelled": "dim",
    "ready": "green",
    "pending": "yellow",
    "revoking": "yellow",
    "revoked": "dim",
    "mixed": "yellow",
}


def state_words(state: str | None) -> str:
    """An allocation's (or cluster's) state in words."""
    words = {
        "running": tr("running"),
        "scheduled": tr("scheduled"),
        "stopped": tr("stopped"),
        "expired": tr("expired"),
        "cancelled": tr("cancelled"),
        "mixed": tr("mixed"),
        "ready": tr("ready"),
    }
    return words.get(state or "", state or "—")


def access_words(state: str | None) -> str:
    """An allocation's access state in words, as its page says it."""
    words = {
        "scheduled": tr("not yet"),
        "pending": tr("getting ready"),
        "ready": trc("access", "ready"),
        "revoking": tr("closing"),
        "revoked": tr("closed"),
    }
    return words.get(state or "", state or "—")


def event_words(kind: str) -> str:
    """An allocation event's kind as its history on the console says it."""
    words = {
        "booked": tr("booked"),
        "stop": tr("stopped by the owner"),
        "start": tr("started"),
        "cancel": tr("cancelled, refunded"),
        "extend": tr("extended"),
        "expire": tr("expired at paid-until"),
        "keys": tr("SSH keys changed"),
        "access_granted": tr("access granted on the node"),
        "access_revoked": tr("access revoked on the node"),
        "move": tr("moved to other GPUs for maintenance"),
        "impaired": tr("GPUs impaired by a provider's fault"),
        "recovered": tr("GPUs working again"),
        "replace": tr("impaired GPUs replaced"),
    }
    return words.get(kind, kind)


def role_words(role: str | None) -> str:
    words = {
        "owner": tr("owner"),
        "member": tr("member"),
        "billing": tr("billing"),
        "viewer": tr("viewer"),
    }
    return words.get(role or "", role or "—")


def state_text(state: str | None) -> Text:
    return Text(state_words(state), style=STATE_STYLE.get(state or "", ""))


def access_text(state: str | None) -> Text:
    return Text(access_words(state), style=STATE_STYLE.get(state or "", ""))


def _table(title: str | None = None) -> Table:
    return Table(
        title=title, title_justify="left", title_style="bold", header_style="bold",
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
    )  # fmt: skip


def models_table(models: list[dict], period: str | None) -> Table:
    periods = []
    for model in models:
        for price in model.get("prices", []):
            if price["period"] not in periods and (period is None or price["period"] == period):
                periods.append(price["period"])
    table = _table()
    table.add_column(tr("Model"))
    table.add_column(tr("Name"))
    table.add_column(tr("Vendor"))
    table.add_column(tr("Memory"), justify="right")
    for slug in periods:
        table.add_column(tr("per %(period)s") % {"period": slug}, justify="right")
    table.add_column(tr("Free now"), justify="right")
    for model in models:
        prices = {p["period"]: money(p["unit_price"], p["currency"]) for p in model["prices"]}
        table.add_row(
            model["slug"],
            model["name"],
            model["vendor"],
            f"{model['memory_gb']} GB",
            *(prices.get(slug, "—") for slug in periods),
            str(model["free_gpus_now"]),
        )
    return table


def quote_table(quote: dict) -> Table:
    currency = quote["currency"]
    what = quote.get("kind") == "extension" and tr("Extension quote") or tr("Quote")
    table = _table(f"{what} {quote['id']}")
    table.add_column(tr("Line"))
    table.add_column(tr("Quantity"), justify="right")
    table.add_column(tr("Unit price (net)"), justify="right")
    table.add_column(tr("Amount (net)"), justify="right")
    for line in quote["lines"]:
        table.add_row(
            line["description"],
            str(line["quantity"]),
            money(line["unit_price"], currency),
            money(line["amount"], currency),
        )
    table.add_section()
    table.add_row(tr("Net total"), "", "", money(quote["net_total"], currency))
    vat_label = tr("VAT %(rate)s") % {"rate": percent(quote["vat_rate"])}
    table.add_row(vat_label, "", "", money(quote["vat_total"], currency))
    table.add_row(
        Text(tr("Total to pay"), style="bold"),
        "",
        "",
        Text(money(quote["total"], currency), style="bold"),
    )
    return table


def quote_notes(quote: dict) -> list[str]:
    notes = [
        tr("Paid period: %(start)s → %(end)s.")
        % {"start": when(quote["paid_from"]), "end": when(quote["paid_until"])},
        tr("The price holds until %(until)s.") % {"until": when(quote["valid_until"])},
    ]
    if quote.get("tax_note"):
        notes.append(quote["tax_note"])
    return notes


def allocations_table(allocations: list[dict]) -> Table:
    table = _table()
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        (tr("ID"), "left"),
        (tr("State"), "left"),
        (tr("Model"), "left"),
        (tr("GPUs"), "right"),
        (tr("Node"), "left"),
        (tr("Region"), "left"),
        (tr("Paid until"), "left"),
        (tr("Access"), "left"),
        (tr("Cluster"), "left"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for allocation in allocations:
        access = allocation.get("access") or {}
        table.add_row(
            short(allocation["id"]),
            state_text(allocation["state"]),
            allocation["gpu_model"],
            str(allocation["gpu_count"]),
            allocation["node"],
            allocation.get("region") or "—",
            when(allocation["paid_until"]),
            access_text(access.get("state")),
            short(allocation.get("cluster")) or "—",
        )
    return table


def allocation_details(allocation: dict) -> Table:
    access = allocation.get("access") or {}
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows = [
        (tr("Allocation"), allocation["id"]),
        (tr("State"), state_text(allocation["state"])),
        (
            tr("GPUs"),
            f"{allocation['gpu_count']} × {allocation['gpu_model']}",
        ),
        (tr("Node"), f"{allocation['node']} ({allocation.get('region') or '—'})"),
        (tr("Paid from"), when(allocation["paid_from"])),
        (tr("Paid until"), when(allocation["paid_until"])),
        (tr("GPU UUIDs"), ", ".join(g["uuid"] for g in allocation.get("gpus", [])) or "—"),
        (tr("Access"), access_text(access.get("state"))),
    ]
    if access.get("ssh_command"):
        rows.append((tr("SSH"), access["ssh_command"]))
    if access.get("detail"):
        rows.append((tr("Node says"), access["detail"]))
    if allocation.get("cluster"):
        rows.append((tr("Cluster"), allocation["cluster"]))
    if allocation.get("impaired_since"):
        rows.append((tr("Impaired since"), when(allocation["impaired_since"])))
    for label, value in rows:
        table.add_row(label, value)
    return table


def events_table(allocation: dict) -> Table:
    table = _table(tr("Events"))
    table.add_column(tr("At"))
    table.add_column(tr("Event"))
    table.add_column(tr("State"))
    table.add_column(tr("By"))
    for event in allocation.get("events", []):
        table.add_row(
            when(event["at"]),
            event_words(event["kind"]),
            state_words(event.get("to_state")) if event.get("to_state") else "",
            event.get("actor") or "",
        )
    return table


def cluster_details(cluster: dict) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, value in (
        (tr("Cluster"), cluster["id"]),
        (tr("State"), state_text(cluster["state"])),
        (
            tr("Nodes"),
            tr("%(nodes)s × %(model)s (%(gpus)s GPUs)")
            % {
                "nodes": cluster["node_count"],
                "model": cluster["gpu_model"],
                "gpus": cluster["gpu_count"],
            },
        ),
        (tr("Network"), f"{cluster['network_group']}: {cluster['fabric']}"),
        (tr("Region"), cluster.get("region") or "—"),
        (tr("Paid from"), when(cluster["paid_from"])),
        (tr("Paid until"), when(cluster["paid_until"])),
    ):
        table.add_row(label, value)
    return table
