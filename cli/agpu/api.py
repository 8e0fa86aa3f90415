"""The public API as agpu uses it: every operation it calls, with what it may send and what
it reads, in one table (`OPERATIONS`), which a test checks against the server's OpenAPI
schema, so the command line and the API cannot drift apart unnoticed. Requests are httpx
with a timeout; an error answer becomes `ApiError`, carrying the problem details
(RFC 9457) and the exit code scripts can rely on."""

from dataclasses import dataclass, field

import httpx

from agpu import __version__
from agpu.i18n import tr

# Exit codes (docs/cli.md): scripts rely on them.
OK, FAILED, USAGE, NOT_FOUND, CONFLICT, PAYMENT, AUTHENTICATION = 0, 1, 2, 3, 4, 5, 6


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    query: tuple[str, ...] = ()
    body: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    # Fields of the answer agpu reads ("a.b" inside an object, "a[].b" inside a list); a
    # paginated list's are its items'.
    reads: tuple[str, ...] = ()
    paginated: bool = False
    binary: bool = False  # a file (PDF, XML)


ALLOCATION_READS = (
    "id", "state", "gpu_model", "gpu_count", "node", "region", "cluster", "paid_from",
    "paid_until", "period", "gpus[].uuid", "gpus[].index", "impaired_since", "events[].at",
    "events[].kind", "events[].to_state", "events[].actor", "access.state", "access.host",
    "access.port", "access.username", "access.ssh_command", "access.detail",
)  # fmt: skip
QUOTE_READS = (
    "id", "kind", "gpu_model", "gpu_count", "node_count", "period", "period_count", "region",
    "lines[].description", "lines[].quantity", "lines[].unit_price", "lines[].amount",
    "net_total", "vat_rate", "vat_total", "tax_note", "total", "currency", "paid_from",
    "paid_until", "valid_until",
)  # fmt: skip
CLUSTER_READS = (
    "id", "state", "gpu_model", "node_count", "gpu_count", "network_group", "fabric", "region",
    "paid_from", "paid_until",
    *(f"allocations[].{name}" for name in ALLOCATION_READS if "[]" not in name),
)  # fmt: skip
PURCHASE = ("Idempotency-Key",)

OPERATIONS: dict[str, Operation] = {
    "token_create": Operation(
        "POST",
        "/api/v1/auth/token/",
        body=("username", "password", "otp", "team", "role", "name"),
        reads=("token",),
    ),  # fmt: skip
    "token_current": Operation(
        "GET",
        "/api/v1/auth/token/current/",
        reads=(
            "id",
            "hint",
            "user",
            "team",
            "team_name",
            "role",
            "expires_at",
            "teams[].id",
            "teams[].name",
            "teams[].personal",
            "teams[].role",
        ),
    ),  # fmt: skip
    "token_exchange": Operation(
        "POST", "/api/v1/auth/token/exchange/", body=("team", "role"), reads=("token",)
    ),
    "token_revoke": Operation("DELETE", "/api/v1/auth/tokens/{id}/"),
    "models": Operation(
        "GET",
        "/api/v1/gpu-models/",
        query=("vendor", "stack", "min_memory_gb", "max_price", "price_period", "fp8", "ordering"),
        reads=(
            "slug",
            "name",
            "vendor",
            "memory_gb",
            "stack",
            "fp8",
            "free_gpus_now",
            "prices[].period",
            "prices[].unit_price",
            "prices[].currency",
        ),
        paginated=True,
    ),  # fmt: skip
    "periods": Operation("GET", "/api/v1/periods/", reads=("slug", "name", "duration_seconds")),
    "availability": Operation(
        "GET",
        "/api/v1/availability/",
        query=(
            "gpu_model",
            "gpu_count",
            "node_count",
            "period",
            "period_count",
            "region",
            "start",
            "end",
        ),
        reads=(
            "earliest_start",
            "windows[].starts_at",
            "windows[].region",
            "windows[].nodes",
            "windows[].nodes_total",
            "days[].date",
            "days[].max_gpus_on_one_node",
            "days[].free_whole_nodes",
            "days[].free_gpus",
        ),
    ),  # fmt: skip
    "quote_create": Operation(
        "POST",
        "/api/v1/quotes/",
        body=(
            "gpu_model",
            "gpu_count",
            "node_count",
            "period",
            "period_count",
            "starts_at",
            "options",
            "region",
        ),
        reads=QUOTE_READS,
    ),  # fmt: skip
    "quote_get": Operation("GET", "/api/v1/quotes/{id}/", reads=QUOTE_READS),
    "book": Operation(
        "POST",
        "/api/v1/bookings/",
        body=("quote", "ssh_keys"),
        headers=PURCHASE,
        reads=(
            "id",
            "cluster",
            "amount",
            "currency",
            *(f"allocations[].{name}" for name in ALLOCATION_READS if "[]" not in name),
        ),
    ),  # fmt: skip
    "allocations": Operation(
        "GET",
        "/api/v1/allocations/",
        query=("state", "gpu_model"),
        reads=ALLOCATION_READS,
        paginated=True,
    ),  # fmt: skip
    "allocation": Operation("GET", "/api/v1/allocations/{id}/", reads=ALLOCATION_READS),
    "allocation_stop": Operation("POST", "/api/v1/allocations/{id}/stop/", reads=ALLOCATION_READS),
    "allocation_start": Operation(
        "POST", "/api/v1/allocations/{id}/start/", reads=ALLOCATION_READS
    ),
    "allocation_cancel": Operation(
        "POST", "/api/v1/allocations/{id}/cancel/", reads=ALLOCATION_READS
    ),
    "allocation_extension_quote": Operation(
        "POST",
        "/api/v1/allocations/{id}/extension-quotes/",
        body=("period_count",),
        reads=QUOTE_READS,
    ),  # fmt: skip
    "allocation_extend": Operation(
        "POST",
        "/api/v1/allocations/{id}/extend/",
        body=("quote",),
        headers=PURCHASE,
        reads=ALLOCATION_READS,
    ),  # fmt: skip
    "allocation_usage": Operation(
        "GET",
        "/api/v1/allocations/{id}/usage/",
        reads=(
            "from",
            "to",
            "paid_hours",
            "hours_left",
            "running_hours",
            "stopped_hours",
            "gpu_hours",
            "covered_gpu_hours",
            "partial",
            "busy_hours",
            "util_avg",
            "util_max",
            "mem_max_mib",
            "energy_kwh",
            "idle_hours",
        ),
    ),  # fmt: skip
    "cluster": Operation("GET", "/api/v1/clusters/{id}/", reads=CLUSTER_READS),
    "cluster_stop": Operation("POST", "/api/v1/clusters/{id}/stop/", reads=CLUSTER_READS),
    "cluster_start": Operation("POST", "/api/v1/clusters/{id}/start/", reads=CLUSTER_READS),
    "cluster_cancel": Operation("POST", "/api/v1/clusters/{id}/cancel/", reads=CLUSTER_READS),
    "cluster_extension_quote": Operation(
        "POST",
        "/api/v1/clusters/{id}/extension-quotes/",
        body=("period_count",),
        reads=QUOTE_READS,
    ),  # fmt: skip
    "cluster_extend": Operation(
        "POST",
        "/api/v1/clusters/{id}/extend/",
        body=("quote",),
        headers=PURCHASE,
        reads=CLUSTER_READS,
    ),  # fmt: skip
    "keys": Operation(
        "GET",
        "/api/v1/ssh-keys/",
        reads=("id", "name", "type", "bits", "fingerprint", "created_at"),
    ),  # fmt: skip
    "key_add": Operation(
        "POST",
        "/api/v1/ssh-keys/",
        body=("name", "public_key"),
        reads=("id", "name", "type", "bits", "fingerprint", "created_at"),
    ),  # fmt: skip
    "key_remove": Operation("DELETE", "/api/v1/ssh-keys/{id}/"),
    "invoices": Operation(
        "GET",
        "/api/v1/invoices/",
        reads=(
            "id",
            "kind",
            "display_number",
            "issued_on",
            "sold_on",
            "corrects",
            "reason",
            "currency",
            "net",
            "vat",
            "gross",
            "legal_note",
            "tax_treatment",
            "lines[].position",
            "lines[].description_en",
            "lines[].description_pl",
            "lines[].quantity",
            "lines[].unit_price",
            "lines[].net",
            "lines[].vat_rate",
            "lines[].vat",
            "lines[].gross",
        ),
        paginated=True,
    ),  # fmt: skip
    "invoice_pdf": Operation("GET", "/api/v1/invoices/{id}/pdf/", binary=True),
    "invoice_xml": Operation("GET", "/api/v1/invoices/{id}/xml/", binary=True),
}


@dataclass
class ApiError(Exception):
    """An error answer: its HTTP status and problem details."""

    status: int
    problem: dict = field(default_factory=dict)

    @property
    def code(self) -> str:
        return self.problem.get("code", "")

    @property
    def exit_code(self) -> int:
        if self.status == 402:
            return PAYMENT
        if self.status in (401, 403):
            return AUTHENTICATION
        if self.status == 404:
            return NOT_FOUND
        if self.status == 409:
            return CONFLICT
        if self.status == 400:
            return USAGE  # the input was wrong: a model, a period, a count
        return FAILED

    def __str__(self) -> str:
        return self.problem.get("detail") or self.problem.get("title") or f"HTTP {self.status}"


class Unreachable(Exception):
    """No answer: the server could not be reached, or did not answer in time."""

    def __init__(self, url: str, *, timed_out: bool, seconds: float):
        super().__init__(url)
        self.url, self.timed_out, self.seconds = url, timed_out, seconds


class Client:
    """The API at `url`, as the holder of `token` (none: anonymous), in `language`."""

    def __init__(self, url: str, *, token: str | None, language: str, timeout: float):
        headers = {
            "Accept": "application/json",
            "Accept-Language": language,
            "User-Agent": f"agpu/{__version__}",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url, self.timeout = url, timeout
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def call(self, name: str, *, ids=None, query=None, body=None, headers=None):
        """The answer of operation `name` (JSON, or bytes for a file; None for 204)."""
        operation = OPERATIONS[name]
        query = {k: v for k, v in (query or {}).items() if v is not None}
        body = None if body is None else {k: v for k, v in body.items() if v is not None}
        # The table above is the contract the schema test checks: nothing outside it goes.
        assert set(query) <= set(operation.query), (name, query)
        assert body is None or set(body) <= set(operation.body), (name, body)
        assert set(headers or {}) <= set(operation.headers), (name, headers)
        path = operation.path.format(**(ids or {}))
        return self._send(operation, path, query=query, body=body, headers=headers)

    def _send(self, operation, path, *, query, body, headers):
        try:
            response = self.http.request(
                operation.method, path, params=query or None, json=body, headers=headers
            )
        except httpx.TimeoutException as exc:
            raise Unreachable(self.url, timed_out=True, seconds=self.timeout) from exc
        except httpx.TransportError as exc:
            raise Unreachable(self.url, timed_out=False, seconds=self.timeout) from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, _problem(response))
        if response.status_code == 204:
            return None
        if operation.binary:
            return response.content
        return response.json()

    def every(self, name: str, *, query=None) -> list:
        """Every item of a paginated list, page after page."""
        items, offset = [], 0
        while True:
            page = self._page(name, query=query, offset=offset)
            items.extend(page["results"])
            if not page.get("next") or not page["results"]:
                return items
            offset += len(page["results"])

    def _page(self, name, *, query, offset):
        operation = OPERATIONS[name]
        params = {k: v for k, v in (query or {}).items() if v is not None}
        assert set(params) <= set(operation.query), (name, params)
        return self._send(
            operation,
            operation.path,
            query={**params, "limit": 500, "offset": offset},
            body=None,
            headers=None,
        )


def _problem(response: httpx.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    return {"status": response.status_code, "detail": tr("The server answered HTTP %(status)s.")
            % {"status": response.status_code}}  # fmt: skip
