"""The API as an integrator meets it: the schema validates, `openapi-python-client`
generates a client from it without a warning, and that client, as generated, runs the
customer's whole flow against a live server."""

import importlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent


@pytest.fixture
def generated(tmp_path):
    """The client generated from the live schema, importable as `anchorgpu_client`."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    schema = json.loads(json.dumps(schema, default=str))
    validate(schema)  # an OpenAPI 3 validator agrees with drf-spectacular
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    output = tmp_path / "anchorgpu_client"
    # The invoices' files are documented as what they are (application/pdf, /xml, /zip);
    # the generator reads binary bodies as application/octet-stream, told so by its config.
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"content_type_overrides": {
        t: "application/octet-stream"
        for t in ("application/pdf", "application/xml", "application/zip")
    }}))  # fmt: skip
    run = subprocess.run(
        [BIN / "openapi-python-client", "generate", "--path", path, "--meta", "none",
         "--output-path", output, "--config", config],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield lambda name: importlib.import_module(f"anchorgpu_client.{name}")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("anchorgpu_client")]:
            del sys.modules[name]


def test_the_generated_client_runs_the_customer_flow(
    generated, catalog, alice, live_server, settings
):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    client_module = generated("client")
    models = generated("models")
    api = {name: generated(f"api.{name}") for name in ("auth", "gpu_models", "quotes",
                                                       "bookings", "allocations", "ledger")}  # fmt: skip
    anonymous = client_module.Client(base_url=live_server.url)

    obtained = generated("api.auth.auth_token_create").sync(
        client=anonymous,
        body=models.TokenRequestRequest(username="alice", password="pw-alice-123456"),
    )
    assert isinstance(obtained, models.Token), obtained
    client = client_module.AuthenticatedClient(base_url=live_server.url, token=obtained.token)
    assert api  # every module imported as generated

    catalog_page = generated("api.gpu_models.gpu_models_list").sync(client=client)
    assert {m.slug for m in catalog_page.results} >= {"h100", "l4"}

    quote = generated("api.quotes.quotes_create").sync(
        client=client,
        body=models.QuoteInRequest(
            gpu_model="l4", gpu_count=1, period="day", period_count=2,
            options=[models.QuoteOptionInRequest(option="nvme-scratch", quantity=1)],
        ),
    )  # fmt: skip
    assert isinstance(quote, models.Quote) and quote.net_total == "34.40"
    assert quote.total == "42.31"  # 34.40 + 23 % VAT (7.912)

    key = str(uuid.uuid4())
    book = generated("api.bookings.bookings_create")
    booking = book.sync(
        client=client, body=models.BookingInRequest(quote=quote.id), idempotency_key=key
    )
    assert isinstance(booking, models.Booking) and booking.amount == quote.total
    replay = book.sync_detailed(
        client=client, body=models.BookingInRequest(quote=quote.id), idempotency_key=key
    )
    assert replay.status_code == 201 and replay.parsed.id == booking.id  # the same booking

    allocation_id = booking.allocation.id
    stopped = generated("api.allocations.allocations_stop_create").sync(
        id=allocation_id, client=client
    )
    assert stopped.state == models.AllocationStateEnum.STOPPED
    started = generated("api.allocations.allocations_start_create").sync(
        id=allocation_id, client=client
    )
    assert started.state == models.AllocationStateEnum.RUNNING

    offer = generated("api.allocations.allocations_extension_quotes_create").sync(
        id=allocation_id, client=client, body=models.ExtensionQuoteInRequest(period_count=1)
    )
    extended = generated("api.allocations.allocations_extend_create").sync(
        id=allocation_id, client=client, body=models.ExtendInRequest(quote=offer.id),
        idempotency_key=str(uuid.uuid4()),
    )  # fmt: skip
    assert extended.paid_until > started.paid_until

    later = generated("api.quotes.quotes_create").sync(
        client=client,
        body=models.QuoteInRequest(gpu_model="h100", gpu_count=1, period="day", period_count=1,
                                   starts_at=started.paid_until),
    )  # fmt: skip
    scheduled = book.sync(
        client=client,
        body=models.BookingInRequest(quote=later.id),
        idempotency_key=str(uuid.uuid4()),
    )
    cancelled = generated("api.allocations.allocations_cancel_create").sync(
        id=scheduled.allocation.id, client=client
    )
    assert cancelled.state == models.AllocationStateEnum.CANCELLED

    ledger = generated("api.ledger.ledger_list").sync(client=client)
    kinds = sorted(entry.kind for entry in ledger.results)
    assert kinds == ["charge", "charge", "charge", "refund"]

    refused = book.sync(
        client=client,
        body=models.BookingInRequest(quote=quote.id),
        idempotency_key=str(uuid.uuid4()),
    )
    assert isinstance(refused, models.Problem)  # the quote was booked already
    assert refused.status == 409 and refused.code == "quote_used"
    cluster_quote = generated("api.quotes.quotes_create").sync(
        client=client,
        body=models.QuoteInRequest(gpu_model="h100", node_count=2, period="day", period_count=1),
    )
    cluster_booking = book.sync(
        client=client, body=models.BookingInRequest(quote=cluster_quote.id),
        idempotency_key=str(uuid.uuid4()),
    )  # fmt: skip
    assert cluster_quote.gpu_count == 16 and len(cluster_booking.allocations) == 2
    cluster = generated("api.clusters.clusters_stop_create").sync(
        id=cluster_booking.cluster, client=client
    )
    assert isinstance(cluster, models.Cluster) and cluster.state == "stopped"

    hook = generated("api.webhooks.webhooks_endpoints_create").sync(
        client=client,
        body=models.EndpointInRequest(
            url="http://127.0.0.1:9/hooks", events=[models.EventsEnum.BOOKING_CREATED]
        ),
    )
    assert isinstance(hook, models.EndpointCreated) and hook.secret.startswith("whsec_")
    generated("api.webhooks.webhooks_endpoints_test_create").sync(id=hook.id, client=client)
    log = generated("api.webhooks.webhooks_endpoints_deliveries_list").sync(
        id=hook.id, client=client
    )
    assert [d.event_type for d in log.results] == ["webhook.test"]
    for used in (client, anonymous):  # keep-alive connections hold the server's DB sessions
        used.get_httpx_client().close()
