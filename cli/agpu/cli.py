"""agpu's commands (click). Each talks to the public API through agpu.api; tables and
words go through agpu.render; what is kept between runs through agpu.config.

Exit codes: 0 done, 1 anything else, 2 usage (a wrong option or argument, or input the API
refused as invalid), 3 not found, 4 conflict (409: capacity gone, a state that does not
allow it), 5 payment (402), 6 authentication (401, 403)."""

import contextlib
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from agpu import __version__, config, i18n, render
from agpu.api import (
    AUTHENTICATION,
    CONFLICT,
    FAILED,
    NOT_FOUND,
    PAYMENT,
    USAGE,
    ApiError,
    Client,
    Unreachable,
)
from agpu.i18n import tr
from agpu.render import err, out

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ID_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{3,35}")
ROLES = ("owner", "member", "billing", "viewer")
STATES = ("scheduled", "running", "stopped", "expired", "cancelled")
LIVE_STATES = ("scheduled", "running", "stopped")
DEFAULT_TIMEOUT = 30.0
PAYMENT_POLL_SECONDS = 5


class Failure(click.ClickException):
    """A refusal or failure in words, with the exit code scripts rely on."""

    def __init__(self, message: str, exit_code: int = FAILED, *, hints=(), problem=None):
        super().__init__(message)
        # click declares exit_code a ClassVar but reads it from the instance (its Exit sets it so)
        self.exit_code = exit_code  # type: ignore[misc]
        self.hints = list(hints)
        self.problem = problem

    def show(self, file=None) -> None:
        if self.problem is not None and State.json:
            render.print_json(self.problem)
        err.print(Text(tr("Error:"), style="bold red"), Text(self.message))
        for hint in self.hints:
            err.print(Text(f"  {hint}"))


class State:
    """What the group's options chose, for the commands."""

    json = False
    url: str = config.DEFAULT_URL
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def token(cls) -> tuple[str | None, str]:
        """The token to send, and where it came from ("env" or "config")."""
        if os.environ.get("AGPU_TOKEN"):
            return os.environ["AGPU_TOKEN"].strip(), "env"
        return config.stored_session(cls.url).get("token"), "config"

    @classmethod
    def client(cls, *, signed_in: bool = True, token: str | None = None) -> Client:
        if signed_in and token is None:
            token = cls.token()[0]
            if not token:
                raise Failure(
                    tr("Not signed in to %(url)s.") % {"url": cls.url},
                    AUTHENTICATION,
                    hints=[tr("Run `agpu login`, or set AGPU_TOKEN to an API token.")],
                )
        return Client(
            cls.url, token=token if signed_in else None, language=i18n.language(),
            timeout=cls.timeout,
        )  # fmt: skip


def _json_flag(function):
    def remember(ctx, param, value):
        State.json = State.json or value
        return value

    return click.option(
        "--json", "as_json", is_flag=True, expose_value=False, callback=remember,
        is_eager=True, help="Print the API's objects as they are (JSON), not tables.",
    )(function)  # fmt: skip


def _note(message: str, style: str = "") -> None:
    err.print(Text(message, style=style))


# --- the group ------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--url", metavar="URL",
    help="The AnchorGPU server (else AGPU_URL, else the last one signed in to, else "
    f"{config.DEFAULT_URL}).",
)  # fmt: skip
@click.option(
    "--lang", type=click.Choice(i18n.LANGUAGES),
    help="The language of messages (else AGPU_LANG, else the locale).",
)  # fmt: skip
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), metavar="SECONDS",
    help=f"How long to wait for each answer (else AGPU_TIMEOUT, else {DEFAULT_TIMEOUT:g}).",
)  # fmt: skip
@click.version_option(__version__, prog_name="agpu")
def cli(url, lang, timeout):
    """AnchorGPU from the command line: find capacity, book GPUs, wait for access, open a
    shell, copy files, stop, extend, read invoices.

    Sign in once with `agpu login` (or set AGPU_TOKEN); every command that prints objects
    takes --json. Exit codes: 0 done, 1 other failure, 2 usage or invalid input, 3 not
    found, 4 conflict, 5 payment, 6 authentication. See docs/cli.md.
    """
    State.url = config.server_url(url)
    if lang:
        i18n.use(lang)
    raw = timeout or os.environ.get("AGPU_TIMEOUT") or DEFAULT_TIMEOUT
    try:
        State.timeout = float(raw)
    except ValueError as exc:
        raise click.BadParameter(str(raw), param_hint="AGPU_TIMEOUT") from exc


# --- signing in -----------------------------------------------------------------------------


def _current(api: Client) -> dict:
    return api.call("token_current")


def _remember(token: str, current: dict) -> None:
    config.session_store(
        State.url,
        {
            "token": token,
            "token_id": current["id"],
            "user": current["user"],
            "team": current["team"],
            "team_name": current["team_name"],
            "role": current["role"],
        },
    )


def _acting_words(current: dict) -> str:
    return tr("%(user)s, acting for team %(team)s as %(role)s") % {
        "user": current["user"],
        "team": current["team_name"],
        "role": render.role_words(current["role"]),
    }


@cli.command()
@click.option("-u", "--username", help="Your user name (asked for when not given).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option(
    "--otp", metavar="CODE", help="A code from your authenticator app, or a recovery code."
)
@click.option(
    "--team",
    type=click.IntRange(min=1),
    help="The ID of the team the token acts for (default: your personal team).",
)
@click.option("--role", type=click.Choice(ROLES), help="A narrower role for the token than yours.")
@click.option(
    "--token-stdin",
    is_flag=True,
    help="Keep an API token read from standard input instead of signing in.",
)
@_json_flag
def login(username, password_stdin, otp, team, role, token_stdin):
    """Sign in and keep an API token for this server.

    Asks for your user name, password and, if your account has two-factor sign-in, a code.
    The token is kept in your config folder (mode 600) and sent only to this server. In
    scripts, set AGPU_TOKEN instead, or pass the password with --password-stdin.
    """  # fmt: skip
    if token_stdin:
        token = sys.stdin.readline().strip()
        if not token:
            raise click.UsageError(tr("No token on standard input."))
    else:
        username = username or click.prompt(tr("User name"), err=True)
        if password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = click.prompt(tr("Password"), hide_input=True, err=True)
        body = {
            "username": username, "password": password, "otp": otp, "team": team,
            "role": role, "name": f"agpu on {socket.gethostname()}"[:80],
        }  # fmt: skip
        anonymous = State.client(signed_in=False)
        try:
            token = anonymous.call("token_create", body=body)["token"]
        except ApiError as exc:
            if exc.code != "otp_required" or otp or password_stdin or not sys.stdin.isatty():
                raise
            body["otp"] = click.prompt(tr("Code from your authenticator app"), err=True)
            token = anonymous.call("token_create", body=body)["token"]
    current = _current(State.client(token=token))
    _retire(config.stored_session(State.url).get("token"), keep=token)
    _remember(token, current)
    if State.json:
        render.print_json(current)
        return
    _note(
        tr("Signed in to %(url)s as %(who)s.") % {"url": State.url, "who": _acting_words(current)}
    )
    _note(tr("The token expires %(at)s.") % {"at": render.when(current["expires_at"])}, "dim")


def _retire(token: str | None, *, keep: str) -> None:
    """Revoke the token this server had from an earlier `agpu login` (best effort): one
    sign-in here, one live token, as tokens are capped per user."""
    if not token or token == keep:
        return
    old = State.client(token=token)
    with contextlib.suppress(ApiError, Unreachable):
        old.call("token_revoke", ids={"id": _current(old)["id"]})


@cli.command()
def logout():
    """Revoke the token on the server and forget it here."""
    token, source = State.token()
    if not token:
        raise Failure(tr("Not signed in to %(url)s.") % {"url": State.url}, AUTHENTICATION)
    api = State.client(token=token)
    try:
        current = _current(api)
        api.call("token_revoke", ids={"id": current["id"]})
        revoked = True
    except ApiError as exc:
        if exc.status != 401:
            raise
        revoked = False  # already dead on the server
    if source == "config" or config.stored_session(State.url).get("token") == token:
        config.session_forget(State.url)
    if revoked:
        _note(tr("Signed out: the token was revoked on %(url)s.") % {"url": State.url})
    else:
        _note(tr("The token was already invalid on %(url)s; it is forgotten here.") % {"url": State.url})  # fmt: skip
    if source == "env":
        _note(tr("AGPU_TOKEN is still set in your environment: unset it."), "yellow")


@cli.command()
@_json_flag
def whoami():
    """Who you are signed in as, and for which team.

    The user, the team the token acts for, its role, and when the token expires.
    """
    token, source = State.token()
    current = _current(State.client())
    if State.json:
        render.print_json(current)
        return
    kept_by = "AGPU_TOKEN" if source == "env" else tr("kept by agpu login")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, value in (
        (tr("Server"), State.url),
        (tr("User"), current["user"]),
        (tr("Team"), f"{current['team_name']} (ID {current['team']})"),
        (tr("Role"), render.role_words(current["role"])),
        (tr("Token"), f"{current['hint']}… ({kept_by})"),
        (tr("Expires"), render.when(current["expires_at"])),
    ):  # fmt: skip
        table.add_row(label, value)
    out.print(table)


@cli.group()
def team():
    """Your teams, and which one agpu acts for."""


@team.command("ls")
@_json_flag
def team_ls():
    """List your teams and your role in each.

    * marks the team the token acts for now.
    """
    current = _current(State.client())
    if State.json:
        render.print_json(current["teams"])
        return
    table = render._table()
    for column in ("", tr("ID"), tr("Team"), tr("Your role"), tr("Personal")):
        table.add_column(column)
    for item in current["teams"]:
        table.add_row(
            "*" if item["id"] == current["team"] else "", str(item["id"]), item["name"],
            render.role_words(item["role"]), tr("yes") if item["personal"] else "",
        )  # fmt: skip
    out.print(table)


@team.command("use")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), help="A narrower role than yours in that team.")
@_json_flag
def team_use(name, role):
    """Act for another of your teams (NAME: its name or ID).

    The token is exchanged on the server for one of that team (POST
    /api/v1/auth/token/exchange/): no password again, never more than your role there and
    the old token's role allow, expiring when the old one would have. The old token is
    revoked.
    """
    token, source = State.token()
    if source == "env" and token:
        raise Failure(
            tr("AGPU_TOKEN is set: agpu cannot replace a token it does not keep."), USAGE,
            hints=[tr("Unset it and run `agpu login`, or set AGPU_TOKEN to a token of that team.")],
        )  # fmt: skip
    api = State.client()
    current = _current(api)
    wanted = [t for t in current["teams"] if str(t["id"]) == name.strip()]
    wanted = wanted or [t for t in current["teams"] if t["name"].casefold() == name.casefold()]
    if not wanted:
        raise Failure(
            tr("You are in no team named %(name)s.") % {"name": name}, NOT_FOUND,
            hints=[tr("Your teams: %(teams)s.") % {"teams": ", ".join(t["name"] for t in current["teams"])}],
        )  # fmt: skip
    if len(wanted) > 1:
        raise Failure(
            tr("Several of your teams are named %(name)s: give its ID (%(ids)s).")
            % {"name": name, "ids": ", ".join(str(t["id"]) for t in wanted)},
            USAGE,
        )
    target = wanted[0]
    if target["id"] == current["team"] and role in (None, current["role"]):
        _note(tr("Already acting for %(team)s.") % {"team": target["name"]})
        return
    new_token = api.call("token_exchange", body={"team": target["id"], "role": role})["token"]
    current = _current(State.client(token=new_token))
    _remember(new_token, current)
    if State.json:
        render.print_json(current)
        return
    _note(tr("Now %(who)s.") % {"who": _acting_words(current)})


# --- the catalog ------------------------------------------------------------------------------


@cli.command()
@click.option("--vendor", type=click.Choice(["nvidia", "amd"]), help="Only this vendor's GPUs.")
@click.option(
    "--stack", type=click.Choice(["cuda", "rocm"]), help="Only GPUs of this software stack."
)
@click.option(
    "--min-memory", type=click.IntRange(min=0), metavar="GB", help="At least this much GPU memory."
)
@click.option("--max-price", metavar="AMOUNT", help="At most this unit price per --period (net).")
@click.option(
    "--period", metavar="PERIOD", help="Show prices of this period only (day, week, month…)."
)
@click.option("--fp8/--no-fp8", default=None, help="Only models with (or without) FP8.")
@click.option(
    "--sort",
    type=click.Choice(["name", "memory", "bandwidth", "-name", "-memory", "-bandwidth"]),
    help="Order (a leading - reverses).",
)
@_json_flag
def models(vendor, stack, min_memory, max_price, period, fp8, sort):
    """List the GPU models, their prices and what is free now.

    Filters are the catalog's: vendor, software stack, memory, FP8, a price ceiling for a
    period. Prices are net, per GPU and period.
    """  # fmt: skip
    if max_price is not None and period is None:
        raise click.UsageError(tr("--max-price needs --period (the price of which period)."))
    ordering = None
    if sort:
        ordering = sort.replace("memory", "memory_gb").replace("bandwidth", "bandwidth_gbps")
    query = {
        "vendor": vendor, "stack": stack, "min_memory_gb": min_memory, "max_price": max_price,
        "price_period": period, "ordering": ordering,
        "fp8": None if fp8 is None else str(fp8).lower(),
    }  # fmt: skip
    found = State.client(signed_in=False).every("models", query=query)
    if State.json:
        render.print_json(found)
        return
    if not found:
        _note(tr("No GPU model matches."))
        return
    out.print(render.models_table(found, period))


def _count_options(function):
    function = click.option(
        "--nodes", type=click.IntRange(min=1), help="Whole nodes of one network group: a cluster."
    )(function)
    return click.option("--gpus", type=click.IntRange(min=1), help="GPUs on one node.")(function)


def _one_count(gpus, nodes) -> dict:
    if (gpus is None) == (nodes is None):
        raise click.UsageError(tr("Give either --gpus or --nodes."))
    return {"gpu_count": gpus, "node_count": nodes}


@cli.command()
@click.argument("model")
@_count_options
@click.option(
    "--period", default="day", show_default=True, help="The rental period (day, week, month…)."
)
@click.option(
    "--periods", type=click.IntRange(min=1), default=1, show_default=True, help="How many periods."
)
@click.option("--region", help="Only this region (its slug).")
@click.option("--from", "start", metavar="TIME", help="From this time (ISO 8601; default: now).")
@click.option(
    "--to", "end", metavar="TIME", help="Until this time (default and at most: 90 days on)."
)
@click.option(
    "--days",
    type=click.IntRange(min=0),
    default=14,
    show_default=True,
    help="How many days of the calendar to print.",
)
@_json_flag
def availability(model, gpus, nodes, period, periods, region, start, end, days):
    """When a model is free: the earliest start and a calendar.

    For MODEL with --gpus N on one node (or --nodes N whole nodes) for --periods of
    --period: the earliest start that fits, start times that fit, and per day the most GPUs
    free on one node. Never more optimistic than a booking.
    """  # fmt: skip
    counts = _one_count(gpus, nodes)
    answer = State.client().call(
        "availability",
        query={"gpu_model": model, **counts, "period": period, "period_count": periods,
               "region": region, "start": start, "end": end},
    )  # fmt: skip
    if State.json:
        render.print_json(answer)
        return
    if answer.get("earliest_start"):
        _say = tr("Earliest start that fits: %(at)s.") % {
            "at": render.when(answer["earliest_start"])
        }
        out.print(Text(_say, style="bold"))
    else:
        out.print(Text(tr("Nothing fits in this window."), style="bold yellow"))
    if answer.get("windows"):
        table = render._table(tr("Start times that fit"))
        for column in (tr("Start"), tr("Region"), tr("Nodes")):
            table.add_column(column)
        for window in answer["windows"]:
            nodes = ", ".join(window["nodes"])
            more = window.get("nodes_total", len(window["nodes"])) - len(window["nodes"])
            if more > 0:  # the answer names the first nodes only
                nodes += " " + tr("(+%(n)s more)") % {"n": more}
            table.add_row(render.when(window["starts_at"]), window["region"], nodes)
        out.print(table)
    if days and answer.get("days"):
        table = render._table(tr("Free per day"))
        for column in (
            tr("Day"),
            tr("Most GPUs on one node"),
            tr("Free whole nodes"),
            tr("Free GPUs"),
        ):
            table.add_column(column, justify="left" if column == tr("Day") else "right")
        for day in answer["days"][:days]:
            table.add_row(day["date"], str(day["max_gpus_on_one_node"]),
                          str(day["free_whole_nodes"]), str(day["free_gpus"]))  # fmt: skip
        out.print(table)


# --- quotes and bookings ---------------------------------------------------------------------


def _quote_options(function):
    for decorator in reversed((
        click.argument("model", required=False),
        _count_options,
        click.option("--period", help="The rental period: day, week, month… (see `agpu models`)."),
        click.option("--periods", type=click.IntRange(min=1), default=1, show_default=True, help="How many periods."),
        click.option("--start", metavar="TIME", help="A later start (ISO 8601, e.g. 2026-12-24T09:00Z); default: now."),
        click.option("--option", "options", multiple=True, metavar="SLUG[=QUANTITY]", help="An option to add (repeat for more)."),
        click.option("--option-input", "inputs", multiple=True, metavar="SLUG=TEXT", help="What an option asks for, e.g. the image to set up."),
        click.option("--region", help="Place only in this region (its slug)."),
    )):  # fmt: skip
        function = decorator(function)
    return function


def _quote_request(model, gpus, nodes, period, periods, start, options, inputs, region) -> dict:
    if not model:
        raise click.UsageError(tr("Name the GPU model (see `agpu models`)."))
    if not period:
        raise click.UsageError(tr("Give --period (day, week, month…)."))
    texts = {}
    for item in inputs:
        slug, sep, text = item.partition("=")
        if not sep:
            raise click.BadParameter(tr("Write SLUG=TEXT."), param_hint="--option-input")
        texts[slug] = text
    chosen = []
    for item in options:
        slug, sep, quantity = item.partition("=")
        if sep and not quantity.isdigit():
            raise click.BadParameter(tr("Write SLUG or SLUG=QUANTITY."), param_hint="--option")
        entry = {"option": slug, "quantity": int(quantity) if sep else 1}
        if slug in texts:
            entry["input"] = texts.pop(slug)
        chosen.append(entry)
    if texts:
        raise click.BadParameter(
            tr("No --option %(slug)s to give it to.") % {"slug": ", ".join(texts)},
            param_hint="--option-input",
        )
    return {
        "gpu_model": model, **_one_count(gpus, nodes), "period": period, "period_count": periods,
        "starts_at": start, "options": chosen or None, "region": region,
    }  # fmt: skip


def _show_quote(quote: dict, *, to_stderr: bool = False) -> None:
    console = err if to_stderr else out
    console.print(render.quote_table(quote))
    for note in render.quote_notes(quote):
        console.print(Text(note, style="dim"))


@cli.command()
@_quote_options
@_json_flag
def quote(model, gpus, nodes, period, periods, start, options, inputs, region):
    """Price a booking: every line, VAT and the total.

    MODEL with --gpus N on one node, or --nodes N for a cluster, for --periods of --period.
    The price holds for a while: book it with `agpu book --quote ID` meanwhile.
    """
    request = _quote_request(model, gpus, nodes, period, periods, start, options, inputs, region)
    made = State.client().call("quote_create", body=request)
    if State.json:
        render.print_json(made)
        return
    _show_quote(made)
    _note(tr("Book it: agpu book --quote %(id)s") % {"id": made["id"]})


def _final(exc: ApiError) -> bool:
    """An answer that settles a purchase: the key is not needed again."""
    if exc.status >= 500 or exc.status == 429:
        return False
    if exc.status == 409 and exc.code == "in_flight":
        return False
    return not (exc.status == 402 and exc.code == "payment_requires_action")


def _purchase(api: Client, operation: str, *, pending: config.Pending, ids=None, body: dict):
    """Send a purchase with the pending Idempotency-Key; keep the key until an answer
    settles it. A card that needs 3-D Secure: print its page and send the same request
    again (same key: it buys once) until it is settled."""
    headers = {"Idempotency-Key": pending.key}
    waited_since = None
    while True:
        try:
            answer = api.call(operation, ids=ids, body=body, headers=headers)
        except ApiError as exc:
            if exc.status == 402 and exc.code == "payment_requires_action":
                waited_since = waited_since or time.monotonic()
                _payment_wait_note(exc.problem)
                if time.monotonic() - waited_since > max(State.timeout, 600):
                    raise Failure(
                        tr("The payment was not confirmed in time; nothing was charged yet."),
                        PAYMENT,
                        hints=[tr("Confirm it, then run the same command again: it pays once.")],
                    ) from exc
                time.sleep(PAYMENT_POLL_SECONDS)
                continue
            if _final(exc):
                pending.done()
            raise
        except Unreachable as exc:
            raise Failure(
                tr("No answer from %(url)s within %(seconds)s s: the purchase may or may not have been made.")
                % {"url": exc.url, "seconds": f"{exc.seconds:g}"},
                FAILED,
                hints=[tr("Run the same command again: it sends the same Idempotency-Key, so it buys at most once.")],
            ) from exc  # fmt: skip
        pending.done()
        return answer


_payment_noted = set()


def _payment_wait_note(problem: dict) -> None:
    link = next(
        (problem[k] for k in ("url", "next_action_url", "action_url", "redirect_url")
         if isinstance(problem.get(k), str)),
        None,
    )  # fmt: skip
    if link in _payment_noted:
        return
    _payment_noted.add(link)
    _note(problem.get("detail") or tr("The card needs you to confirm the payment."), "yellow")
    if link:
        _note(tr("Confirm it here: %(url)s") % {"url": link}, "bold")
    _note(
        tr("Waiting for the confirmation (Ctrl-C stops waiting; the same command resumes)…"), "dim"
    )


def _team_of_session():
    return config.stored_session(State.url).get("team") if State.token()[1] == "config" else None


def _allocation_words(allocation: dict) -> str:
    return tr("%(id)s: %(count)s × %(model)s on %(node)s, %(state)s, paid until %(until)s") % {
        "id": allocation["id"],
        "count": allocation["gpu_count"],
        "model": allocation["gpu_model"],
        "node": allocation["node"],
        "state": render.state_words(allocation["state"]),
        "until": render.when(allocation["paid_until"]),
    }


@cli.command()
@_quote_options
@click.option(
    "--quote", "quote_id", metavar="QUOTE", help="Book this quote (from `agpu quote`) instead."
)
@click.option(
    "--key",
    "keys",
    type=int,
    multiple=True,
    metavar="KEY_ID",
    help="Let in only these SSH keys (see `agpu keys ls`; default: all yours).",
)
@click.option("-y", "--yes", is_flag=True, help="Book without asking (scripts).")
@_json_flag
def book(model, gpus, nodes, period, periods, start, options, inputs, region, quote_id, keys, yes):
    """Book GPUs, after showing the complete quote.

    MODEL with --gpus N on one node, or --nodes N whole nodes for a cluster (or --quote ID,
    from `agpu quote`). Shows the complete quote (every line, VAT, the total) and asks
    before paying unless --yes. The purchase carries an Idempotency-Key kept on disk until
    an answer settles it: run the same command again after a timeout and it is made once;
    once answered, the same command books again.
    """
    if quote_id:
        request = {"quote": quote_id.strip().lower()}
    else:
        request = _quote_request(
            model, gpus, nodes, period, periods, start, options, inputs, region
        )
    request["ssh_keys"] = sorted(keys) or None
    api = State.client()
    pending = config.Pending(url=State.url, team=_team_of_session(), request={"book": request})
    if pending.retrying and pending.state.get("quote"):
        _note(tr("Retrying the booking sent earlier with the same Idempotency-Key: it is made at most once."), "yellow")  # fmt: skip
        made = api.call("quote_get", ids={"id": pending.state["quote"]})
    elif quote_id:
        made = api.call("quote_get", ids={"id": request["quote"]})
    else:
        made = api.call("quote_create", body={k: v for k, v in request.items() if k != "ssh_keys"})
    _show_quote(made, to_stderr=State.json)
    if not yes and not click.confirm(
        tr("Book and pay %(total)s?") % {"total": render.money(made["total"], made["currency"])},
        err=True,
    ):
        raise Failure(tr("Nothing was booked."), FAILED)
    pending.keep(quote=made["id"])
    booking = _purchase(
        api, "book", pending=pending,
        body={"quote": made["id"], "ssh_keys": request["ssh_keys"]},
    )  # fmt: skip
    if State.json:
        render.print_json(booking)
        return
    charged = render.money(booking["amount"], booking["currency"])
    if booking.get("cluster"):
        out.print(Text(tr("Booked cluster %(id)s, charged %(amount)s.") % {"id": booking["cluster"], "amount": charged}, style="bold green"))  # fmt: skip
        out.print(render.allocations_table(booking["allocations"]))
        _note(tr("Wait for access: agpu wait %(id)s --for ready") % {"id": booking["cluster"]}, "dim")  # fmt: skip
    else:
        out.print(Text(tr("Booked, charged %(amount)s.") % {"amount": charged}, style="bold green"))
        out.print(Text(_allocation_words(booking["allocations"][0])))
        _note(tr("Wait for access: agpu wait %(id)s --for ready") % {"id": booking["id"]}, "dim")


# --- allocations ----------------------------------------------------------------------------


def _resolve(api: Client, ident: str) -> tuple[str, dict]:
    """("allocation" | "cluster", its object) for an ID or the start of one."""
    ident = ident.strip().lower()
    if UUID.fullmatch(ident):
        try:
            return "allocation", api.call("allocation", ids={"id": ident})
        except ApiError as exc:
            if exc.status != 404:
                raise
        try:
            return "cluster", api.call("cluster", ids={"id": ident})
        except ApiError as exc:
            if exc.status != 404:
                raise
            raise Failure(
                tr("No allocation or cluster %(id)s is yours to see.") % {"id": ident}, NOT_FOUND
            ) from exc
    if not ID_PREFIX.fullmatch(ident):
        raise click.BadParameter(
            tr("%(id)s is not an ID (see `agpu ls`).") % {"id": ident}, param_hint="ID"
        )
    every = api.every("allocations")
    allocations = [a for a in every if a["id"].startswith(ident)]
    clusters = sorted({a["cluster"] for a in every if a.get("cluster", "") and a["cluster"].startswith(ident)})  # fmt: skip
    found = [("allocation", a["id"]) for a in allocations] + [("cluster", c) for c in clusters]
    if not found:
        raise Failure(tr("No allocation or cluster of yours starts with %(id)s.") % {"id": ident}, NOT_FOUND)  # fmt: skip
    if len(found) > 1:
        raise Failure(
            tr("%(id)s is the start of several IDs: give more of it.") % {"id": ident}, USAGE,
            hints=[", ".join(identifier for _kind, identifier in found)],
        )  # fmt: skip
    kind, identifier = found[0]
    return kind, api.call(kind, ids={"id": identifier})


def _single(kind: str, item: dict, message: str) -> dict:
    """The allocation itself; a cluster's ID is refused with `message` and its nodes'."""
    if kind == "cluster":
        raise Failure(
            message % {"id": item["id"]},
            USAGE,
            hints=[", ".join(a["id"] for a in item["allocations"])],
        )
    return item


@cli.command("ls")
@click.option("--state", type=click.Choice(STATES), help="Only allocations in this state.")
@click.option("--model", help="Only this GPU model (its slug).")
@click.option("-a", "--all", "every", is_flag=True, help="Also the expired and cancelled ones.")
@_json_flag
def ls(state, model, every):
    """List your team's allocations.

    Scheduled, running and stopped ones; with --all the expired and cancelled ones too.
    IDs are shown by their start: any command takes the start of an ID.
    """
    api = State.client()
    if state or every:
        found = api.every("allocations", query={"state": state, "gpu_model": model})
    else:
        found = []
        for live in LIVE_STATES:
            found += api.every("allocations", query={"state": live, "gpu_model": model})
        found.sort(key=lambda a: a["paid_from"], reverse=True)
    if State.json:
        render.print_json(found)
        return
    if not found:
        _note(tr("No allocations."))
        return
    out.print(render.allocations_table(found))


@cli.command()
@click.argument("ident", metavar="ID")
@_json_flag
def show(ident):
    """Show an allocation or a cluster.

    Its GPUs, paid period, access (the ssh command) and events; for a cluster its nodes.
    """
    kind, item = _resolve(State.client(), ident)
    if State.json:
        render.print_json(item)
        return
    if kind == "cluster":
        out.print(render.cluster_details(item))
        out.print(render.allocations_table(item["allocations"]))
        return
    out.print(render.allocation_details(item))
    out.print(render.events_table(item))


WAIT_FOR = ("ready", "running", "stopped", "expired", "cancelled")


def _reached(allocation: dict, goal: str) -> bool:
    if goal == "ready":
        return allocation["state"] == "running" and (allocation.get("access") or {}).get("state") == "ready"  # fmt: skip
    return allocation["state"] == goal


def _never(allocation: dict, goal: str) -> bool:
    """Whether `goal` can no longer come: an ended allocation stays ended."""
    ended = allocation["state"] in ("expired", "cancelled")
    return ended and allocation["state"] != goal


@cli.command()
@click.argument("ident", metavar="ID")
@click.option(
    "--for",
    "goal",
    type=click.Choice(WAIT_FOR),
    default="ready",
    show_default=True,
    help="ready: running with SSH access granted; or a state.",
)
@click.option(
    "--timeout",
    "limit",
    type=click.FloatRange(min=0),
    default=600,
    show_default=True,
    metavar="SECONDS",
    help="Give up after this long.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2,
    show_default=True,
    metavar="SECONDS",
    help="How often to look.",
)
@_json_flag
def wait(ident, goal, limit, interval):
    """Wait until an allocation is ready, or in a state.

    Ready means running with SSH access granted by the node. For a cluster, every node.
    Exits 1 after --timeout, 4 if it ended and never will be.
    """  # fmt: skip
    api = State.client()
    kind, item = _resolve(api, ident)
    started = time.monotonic()

    def members(current):
        return current["allocations"] if kind == "cluster" else [current]

    def states(current) -> str:
        return "; ".join(
            tr("%(state)s, access %(access)s")
            % {
                "state": render.state_words(a["state"]),
                "access": render.access_words((a.get("access") or {}).get("state")),
            }
            for a in members(current)
        )

    def words(current) -> str:
        return tr("Waiting for %(id)s to be %(goal)s (now %(states)s)…") % {
            "id": render.short(current["id"]), "goal": render.state_words(goal),
            "states": states(current),
        }  # fmt: skip

    status = err.status(words(item)) if err.is_terminal else None
    if status:
        status.start()
    try:
        while True:
            if all(_reached(a, goal) for a in members(item)):
                break
            ended = [a for a in members(item) if _never(a, goal)]
            if ended:
                raise Failure(
                    tr("%(id)s is %(state)s: it will not be %(goal)s.")
                    % {"id": ended[0]["id"], "state": render.state_words(ended[0]["state"]),
                       "goal": render.state_words(goal)},
                    CONFLICT,
                )  # fmt: skip
            if time.monotonic() - started > limit:
                raise Failure(
                    tr("Not %(goal)s after %(seconds)s s.") % {"goal": render.state_words(goal), "seconds": f"{limit:g}"},
                    FAILED, hints=[tr("Now: %(states)s.") % {"states": states(item)}],
                )  # fmt: skip
            time.sleep(interval)
            item = api.call(kind, ids={"id": item["id"]})
            if status:
                status.update(words(item))
    finally:
        if status:
            status.stop()
    if State.json:
        render.print_json(item)
        return
    _note(tr("%(id)s is %(goal)s.") % {"id": item["id"], "goal": render.state_words(goal)}, "green")
    if goal == "ready":
        for allocation in members(item):
            out.print(Text(allocation["access"]["ssh_command"]))


def _ssh_args(identity, ssh_options) -> list[str]:
    args = []
    if identity:
        args += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
    for option in ssh_options:
        args += ["-o", option]
    return args


def _ready_access(allocation: dict) -> dict:
    access = allocation.get("access") or {}
    if allocation["state"] != "running" or access.get("state") != "ready":
        raise Failure(
            tr("%(id)s has no SSH access now (%(state)s, access %(access)s).")
            % {"id": allocation["id"], "state": render.state_words(allocation["state"]),
               "access": render.access_words(access.get("state"))},
            CONFLICT,
            hints=[tr("agpu wait %(id)s --for ready") % {"id": render.short(allocation["id"])}],
        )  # fmt: skip
    return access


def _program(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise Failure(tr("OpenSSH's %(program)s is not installed here.") % {"program": name})
    return found


def _host(access: dict) -> str:
    host = access["host"]
    return f"[{host}]" if ":" in host else host


@cli.command()
@click.argument("ident", metavar="ID")
@click.argument("command", nargs=-1, metavar="[-- COMMAND...]")
@click.option(
    "-i",
    "identity",
    type=click.Path(exists=True, dir_okay=False),
    metavar="KEYFILE",
    help="The private key to log in with (else ssh's own choice).",
)
@click.option(
    "-o",
    "ssh_options",
    multiple=True,
    metavar="OPTION",
    help="An option for ssh, as ssh -o takes it (repeat for more).",
)
def ssh(ident, command, identity, ssh_options):
    """Open a shell on an allocation, or run a command.

    Runs OpenSSH's ssh with the allocation's login, host and port; after -- comes the
    command to run there, e.g.: agpu ssh 1a2b3c4d -- nvidia-smi -L
    """  # fmt: skip
    kind, item = _resolve(State.client(), ident)
    access = _ready_access(
        _single(kind, item, tr("%(id)s is a cluster: open a shell on one of its allocations."))
    )
    argv = [_program("ssh"), "-p", str(access["port"]), *_ssh_args(identity, ssh_options),
            f"{access['username']}@{access['host']}", *command]  # fmt: skip
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


REMOTE = re.compile(r"^([0-9A-Fa-f][0-9A-Fa-f-]{3,35}):(.*)$")


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="SOURCE... DEST")
@click.option(
    "-i",
    "identity",
    type=click.Path(exists=True, dir_okay=False),
    metavar="KEYFILE",
    help="The private key to log in with.",
)
@click.option(
    "-o",
    "ssh_options",
    multiple=True,
    metavar="OPTION",
    help="An option for ssh (repeat for more).",
)
@click.option("-r", "recursive", is_flag=True, help="Copy folders with what is in them.")
def cp(paths, identity, ssh_options, recursive):
    """Copy files to or from an allocation (like scp).

    Write the allocation's side as ID:PATH; OpenSSH's scp copies. For example:
    agpu cp train.py 1a2b3c4d:  and  agpu cp 1a2b3c4d:results.txt .  PATH is relative to
    the allocation's home (or /tmp/…). A local path with a colon is written ./like:this.
    """
    if len(paths) < 2:
        raise click.UsageError(tr("Give at least one source and a destination."))
    api = State.client()
    access, mapped = None, []
    for path in paths:
        match = REMOTE.match(path)
        if not match:
            mapped.append(path)
            continue
        kind, item = _resolve(api, match.group(1))
        here = _ready_access(
            _single(kind, item, tr("%(id)s is a cluster: copy to or from one of its allocations."))
        )
        if access is not None and here != access:
            raise click.UsageError(tr("Copy with one allocation at a time."))
        access = here
        mapped.append(f"{here['username']}@{_host(here)}:{match.group(2)}")
    if access is None:
        raise click.UsageError(tr("One side must be an allocation: ID:PATH."))
    argv = [_program("scp"), "-P", str(access["port"]), *_ssh_args(identity, ssh_options),
            *(["-r"] if recursive else []), *mapped]  # fmt: skip
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


def _act(ident: str, action: str, *, done_words: str, confirm=None, yes: bool = False):
    api = State.client()
    kind, item = _resolve(api, ident)
    if confirm and not yes and not click.confirm(confirm(api, kind, item), err=True):
        raise Failure(tr("Nothing was changed."), FAILED)
    changed = api.call(f"{kind}_{action}", ids={"id": item["id"]})
    if State.json:
        render.print_json(changed)
        return
    _note(done_words % {"id": changed["id"], "until": render.when(changed["paid_until"])}, "green")  # fmt: skip
    if kind == "cluster":
        out.print(render.allocations_table(changed["allocations"]))
    else:
        out.print(render.allocation_details(changed))


@cli.command()
@click.argument("ident", metavar="ID")
@_json_flag
def stop(ident):
    """Stop an allocation: access ends, the paid period runs on.

    Files stay until the paid period ends; a cluster's ID stops every node. Stopping
    never pauses the paid period: it still ends at paid_until.
    """
    _act(ident, "stop", done_words=tr("Stopped %(id)s. Its paid period still ends %(until)s: stopping does not pause it."))  # fmt: skip


@cli.command()
@click.argument("ident", metavar="ID")
@_json_flag
def start(ident):
    """Start a stopped allocation again.

    Within its paid period; a cluster's ID starts every node.
    """
    _act(ident, "start", done_words=tr("Started %(id)s, paid until %(until)s."))


def _cancel_question(api, kind, item) -> str:
    quote = api.call("quote_get", ids={"id": item["quote"]})
    return tr("Cancel %(id)s before its start and get %(total)s back?") % {
        "id": item["id"], "total": render.money(quote["total"], quote["currency"]),
    }  # fmt: skip


@cli.command()
@click.argument("ident", metavar="ID")
@click.option("-y", "--yes", is_flag=True, help="Cancel without asking.")
@_json_flag
def cancel(ident, yes):
    """Cancel a booking before it starts: a full refund.

    A cluster is cancelled whole. After the start there is no cancel, only stop. Asks
    first, showing the refund, unless --yes.
    """
    _act(ident, "cancel", done_words=tr("Cancelled %(id)s: refunded in full."), confirm=_cancel_question, yes=yes)  # fmt: skip


@cli.command()
@click.argument("ident", metavar="ID")
@click.option(
    "--periods",
    type=click.IntRange(min=1),
    required=True,
    help="How many more periods, straight after paid_until.",
)
@click.option("-y", "--yes", is_flag=True, help="Extend without asking (scripts).")
@_json_flag
def extend(ident, periods, yes):
    """Extend an allocation by whole periods.

    On the same GPUs, straight after paid_until, if they are free (a cluster: all of it).
    Shows the extension's quote and asks before paying unless --yes; retried after a
    timeout, it is made once, as `agpu book` is.
    """  # fmt: skip
    api = State.client()
    kind, item = _resolve(api, ident)
    pending = config.Pending(
        url=State.url, team=_team_of_session(), request={"extend": item["id"], "periods": periods}
    )
    if pending.retrying and pending.state.get("quote"):
        _note(tr("Retrying the extension sent earlier with the same Idempotency-Key: it is made at most once."), "yellow")  # fmt: skip
        offer = api.call("quote_get", ids={"id": pending.state["quote"]})
    else:
        offer = api.call(f"{kind}_extension_quote", ids={"id": item["id"]}, body={"period_count": periods})  # fmt: skip
    _show_quote(offer, to_stderr=State.json)
    if not yes and not click.confirm(
        tr("Extend and pay %(total)s?")
        % {"total": render.money(offer["total"], offer["currency"])},
        err=True,
    ):
        raise Failure(tr("Nothing was extended."), FAILED)
    pending.keep(quote=offer["id"])
    extended = _purchase(api, f"{kind}_extend", pending=pending, ids={"id": item["id"]}, body={"quote": offer["id"]})  # fmt: skip
    if State.json:
        render.print_json(extended)
        return
    _note(tr("Extended %(id)s: paid until %(until)s.") % {"id": extended["id"], "until": render.when(extended["paid_until"])}, "green")  # fmt: skip


@cli.command()
@click.argument("ident", metavar="ID")
@_json_flag
def usage(ident):
    """What an allocation's GPUs did.

    Paid, running and stopped hours, GPU-hours busy and idle, utilisation, memory, energy.
    """
    kind, item = _resolve(State.client(), ident)
    allocation = _single(
        kind, item, tr("%(id)s is a cluster: read the usage of one of its allocations.")
    )
    used = State.client().call("allocation_usage", ids={"id": allocation["id"]})
    if State.json:
        render.print_json(used)
        return
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(justify="right")

    def hours(value):
        return render.measure(value, 2, "h")

    for label, value in (
        (tr("From"), render.when(used["from"])),
        (tr("To"), render.when(used["to"])),
        (tr("Paid hours"), hours(used["paid_hours"])),
        (tr("Hours left"), hours(used["hours_left"])),
        (tr("Running hours"), hours(used["running_hours"])),
        (tr("Stopped hours"), hours(used["stopped_hours"])),
        (tr("GPU-hours"), hours(used["gpu_hours"])),
        (tr("Busy GPU-hours"), hours(used["busy_hours"])),
        (tr("Idle hours"), hours(used["idle_hours"])),
        (tr("Utilisation (mean / peak)"), " / ".join(render.measure(v, 1, "%") for v in (used["util_avg"], used["util_max"]))),
        (tr("Memory used at most"), render.measure(used["mem_max_mib"], 0, "MiB")),
        (tr("Energy"), render.measure(used["energy_kwh"], 3, "kWh")),
    ):  # fmt: skip
        table.add_row(label, value)
    out.print(table)
    if used["partial"]:
        _note(tr("Telemetry saw under 95 % of this window: the figures cover what it saw."), "yellow")  # fmt: skip


# --- SSH keys ---------------------------------------------------------------------------------


@cli.group()
def keys():
    """Your SSH public keys: bookings let them in on their nodes."""


def _keys_table(found: list[dict]) -> Table:
    table = render._table()
    for column in (tr("ID"), tr("Name"), tr("Type"), tr("Bits"), tr("Fingerprint"), tr("Added")):
        table.add_column(column)
    for key in found:
        table.add_row(str(key["id"]), key["name"], key["type"], str(key["bits"]),
                      key["fingerprint"], render.when(key["created_at"]))  # fmt: skip
    return table


@keys.command("add")
@click.argument("public_key", type=click.File("r", encoding="utf-8"), metavar="PUBLIC_KEY_FILE")
@click.option("--name", default="", help="A name to tell it by (default: the key's comment).")
@_json_flag
def keys_add(public_key, name):
    """Add a public key (a .pub file, or - for standard input)."""
    text = public_key.read()
    if "PRIVATE KEY" in text:
        raise click.BadParameter(
            tr("This is a private key: give its .pub file, and never send the private one."),
            param_hint="PUBLIC_KEY_FILE",
        )
    added = State.client().call("key_add", body={"name": name, "public_key": text.strip()})
    if State.json:
        render.print_json(added)
        return
    _note(tr("Added key %(id)s: %(fingerprint)s.") % added, "green")


@keys.command("ls")
@_json_flag
def keys_ls():
    """List your SSH public keys."""
    found = State.client().call("keys")
    if State.json:
        render.print_json(found)
        return
    if not found:
        _note(tr("No SSH keys: add one with `agpu keys add ~/.ssh/id_ed25519.pub`."))
        return
    out.print(_keys_table(found))


@keys.command("rm")
@click.argument("key_id", type=int, metavar="KEY_ID")
def keys_rm(key_id):
    """Remove a key: allocations it was chosen for stop letting it in."""
    State.client().call("key_remove", ids={"id": key_id})
    _note(tr("Removed key %(id)s.") % {"id": key_id}, "green")


# --- invoices ---------------------------------------------------------------------------------


@cli.group()
def invoices():
    """Your team's invoices and credit notes."""


@invoices.command("ls")
@_json_flag
def invoices_ls():
    """List the invoices and credit notes, newest first."""
    found = State.client().every("invoices")
    if State.json:
        render.print_json(found)
        return
    if not found:
        _note(tr("No invoices yet."))
        return
    table = render._table()
    for column, justify in ((tr("ID"), "right"), (tr("Number"), "left"), (tr("Kind"), "left"),
                            (tr("Issued"), "left"), (tr("Net"), "right"), (tr("VAT"), "right"),
                            (tr("Gross"), "right")):  # fmt: skip
        table.add_column(column, justify=justify)
    for invoice in found:
        currency = invoice.get("currency")
        table.add_row(
            str(invoice["id"]), invoice["display_number"] or "…", _kind_words(invoice["kind"]),
            invoice["issued_on"], render.money(invoice["net"], currency),
            render.money(invoice["vat"], currency), render.money(invoice["gross"], currency),
        )  # fmt: skip
    out.print(table)


def _kind_words(kind: str) -> str:
    return {"invoice": tr("invoice"), "credit_note": tr("credit note")}.get(kind, kind)


@invoices.command("get")
@click.argument("ident", metavar="ID")
@click.option("--pdf", "as_pdf", is_flag=True, help="Save its PDF.")
@click.option("--xml", "as_xml", is_flag=True, help="Save its FA(3) XML.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    help="Where to save it (default: its number, in this folder).",
)
@_json_flag
def invoices_get(ident, as_pdf, as_xml, output):
    """Show an invoice, or save its PDF or XML.

    ID is the invoice's ID or its number, such as AG/2026/000123.
    """  # fmt: skip
    if as_pdf and as_xml:
        raise click.UsageError(tr("Choose --pdf or --xml, not both."))
    api = State.client()
    found = [
        i for i in api.every("invoices") if ident.strip() in (str(i["id"]), i["display_number"])
    ]
    if not found:
        raise Failure(tr("No invoice %(id)s of your team.") % {"id": ident}, NOT_FOUND)
    invoice = found[0]
    if as_pdf or as_xml:
        kind = "pdf" if as_pdf else "xml"
        body = api.call(f"invoice_{kind}", ids={"id": invoice["id"]})
        target = Path(output or re.sub(r"[^A-Za-z0-9_.-]+", "-", invoice["display_number"]) + f".{kind}")  # fmt: skip
        target.write_bytes(body)
        _note(tr("Saved %(file)s (%(size)s bytes).") % {"file": target, "size": render.number(len(body))}, "green")  # fmt: skip
        return
    if State.json:
        render.print_json(invoice)
        return
    currency = invoice.get("currency")
    title = f"{_kind_words(invoice['kind']).capitalize()} {invoice['display_number'] or '…'}"
    table = render._table(title)
    for column, justify in ((tr("Line"), "left"), (tr("Quantity"), "right"), (tr("Unit price (net)"), "right"),
                            (tr("Net"), "right"), (tr("VAT"), "right"), (tr("Gross"), "right")):  # fmt: skip
        table.add_column(column, justify=justify)
    described = "description_pl" if i18n.language() == "pl" else "description_en"
    for line in invoice["lines"]:
        table.add_row(line[described], render.number(line["quantity"], 0),
                      render.money(line["unit_price"], currency), render.money(line["net"], currency),
                      render.money(line["vat"], currency), render.money(line["gross"], currency))  # fmt: skip
    table.add_section()
    table.add_row(Text(tr("Total"), style="bold"), "", "", render.money(invoice["net"], currency),
                  render.money(invoice["vat"], currency),
                  Text(render.money(invoice["gross"], currency), style="bold"))  # fmt: skip
    out.print(table)
    _note(tr("Issued %(issued)s, sale date %(sold)s.") % {"issued": invoice["issued_on"], "sold": invoice["sold_on"]}, "dim")  # fmt: skip
    if invoice.get("legal_note"):
        _note(invoice["legal_note"], "dim")


# --- running ----------------------------------------------------------------------------------


def _language_from_argv(argv: list[str]) -> str | None:
    for index, word in enumerate(argv):
        if word == "--":
            return None
        if word == "--lang" and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--lang="):
            return word.split("=", 1)[1]
    return None


def _problem_failure(exc: ApiError) -> Failure:
    """The problem details in words: the title where fields are named (each field with its
    message below), else the detail; and what to do about it."""
    problem = exc.problem
    errors = problem.get("errors") or {}
    hints = [
        f"{name}: {message}"
        for name, messages in errors.items()
        for message in (messages if isinstance(messages, list) else [messages])
    ]
    detail = (problem.get("title") if hints else None) or problem.get("detail") or str(exc)
    if exc.status == 401:
        hints.append(tr("Sign in again with `agpu login`, or set AGPU_TOKEN to a live token."))
    if problem.get("earliest_start"):
        hints.append(tr("The earliest start that fits: %(at)s (--start).") % {"at": render.when(problem["earliest_start"])})  # fmt: skip
    if exc.status == 402:
        hints.append(tr("The payment was refused: nothing was booked or charged."))
    if exc.status == 409 and exc.code == "in_flight":
        hints.append(tr("Run the same command again in a moment: it keeps the same Idempotency-Key."))  # fmt: skip
    return Failure(detail, exc.exit_code, hints=hints, problem=problem)


def main() -> None:
    i18n.use(i18n.detect(_language_from_argv(sys.argv[1:])))
    try:
        code = cli.main(prog_name="agpu", standalone_mode=False)
    except click.exceptions.Abort:
        err.print(Text(tr("Stopped."), style="yellow"))
        sys.exit(FAILED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ApiError as exc:
        failure = _problem_failure(exc)
        failure.show()
        sys.exit(failure.exit_code)
    except Unreachable as exc:
        failure = Failure(
            (tr("No answer from %(url)s within %(seconds)s s.") if exc.timed_out
             else tr("Cannot reach %(url)s.")) % {"url": exc.url, "seconds": f"{exc.seconds:g}"},
            FAILED,
            hints=[tr("Is the address right (--url, AGPU_URL)? Is the server up?")],
        )  # fmt: skip
        failure.show()
        sys.exit(FAILED)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
