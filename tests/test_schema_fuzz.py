"""schemathesis against our OpenAPI schema with two users: no 5xx, no undocumented status,
and no way to reach the other user's objects. Every operation is fuzzed as alice, each {id}
her own object; every operation with an {id} again with bob's object there, so both the real
paths and the refusals are fuzzed; and every operation without one as bob, who must see none
of alice's objects. And deterministically: every documented GET endpoint, called once in a
real world, answers 200 with the body its schema describes.

Operations without an {id} are fuzzed as bob, and operations with one at bob's object, in
schemathesis' random phase only: its coverage phase (about 90 of an operation's 110 cases,
the schema's boundary values) is the same requests as alice's on her own objects, which that
test sends already; at bob's id every body is refused alike (as invalid, or the object as
not alice's), so the boundary values would only repeat the refusals of the random cases."""

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.utils import timezone
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.models import ApiToken
from accounts.roles import acting_as, personal_team
from accounts.services.ssh_keys import ssh_key_add
from accounts.services.tokens import api_token_create
from catalog.models import Gpu
from core.sealed import seal
from invoices.models import Invoice
from invoices.services import invoices_number
from rentals.models import Allocation
from rentals.services import allocation_book, quote_create
from rentals.services.exports import statement_export_request, statement_export_run
from telemetry.agents import agent_credential_issue
from telemetry.models import SEVERITY, Flag, FlagKind
from tests.support.booking import book
from tests.support.factories.catalog import catalog_setup
from tests.support.factories.invoices import pln_rates_create
from tests.support.operators import OPERATIONS
from tests.support.ssh import ed25519_key, public_line
from webhooks.models import WebhookEndpoint

schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
randomly = schemathesis.openapi.from_dict(
    schema.raw_schema,
    config=SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}}),
)
randomly.app, randomly.location = schema.app, schema.location
WITH_ID = r"\{id\}"


@pytest.fixture
def keep_test_connection():
    """Calls go straight into the WSGI app (not Django's test client), whose request signals
    would close the test transaction's connection; keep it open as the test client does."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture(scope="module")
def _two_users_world(django_db_setup, django_db_blocker):
    """Built once per module (and xdist worker) inside a transaction that is rolled back at
    the end: each test's own transaction is then a savepoint inside it, rolled back after
    the test, so every test starts from this same world, as when each built its own."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield _two_users_build(get_user_model())
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture
def two_users(_two_users_world, db, keep_test_connection):
    return _two_users_world


def _two_users_build(django_user_model) -> dict:
    catalog_setup(h100_nodes=((8, 8), (4,), (8, 8)))  # two 2-node network groups
    pln_rates_create()  # the invoices' PLN VAT: without a rate they are held, not issued
    alice = django_user_model.objects.create_user("fuzz-alice")
    bob = django_user_model.objects.create_user("fuzz-bob")
    alices = book(alice, model="h100", count=1, period="day", periods=3)
    bobs = book(bob, model="l4", count=1, period="day")
    clusters = {
        user.username: allocation_book(
            acting=acting_as(user),
            quote=quote_create(
                acting=acting_as(user), gpu_model="h100", node_count=2, period="day",
                period_count=3,
            ),
        ).cluster_id
        for user in (alice, bob)
    }  # fmt: skip
    hooks = {
        user.username: WebhookEndpoint.objects.create(
            team=personal_team(user), created_by=user, url="https://hooks.example.com/in",
            events=["booking.created"], secret_sealed=seal("whsec_" + "A" * 43),
        ).pk
        for user in (alice, bob)
    }  # fmt: skip
    token = api_token_create(user=alice, name="fuzz")
    api_token_create(user=alice, name="spare")  # what DELETE /auth/tokens/{pk} may revoke
    bobs_token = api_token_create(user=bob, name="bobs")
    tokens = dict(ApiToken.objects.values_list("name", "pk"))
    teams = {u.username: personal_team(u).pk for u in (alice, bob)}
    keys = {
        u.username: ssh_key_add(user=u, public_key=public_line(ed25519_key())).pk
        for u in (alice, bob)
    }
    invoices_number()  # after the bookings' commits, by a worker: the PDF is there once numbered
    invoices = {i.team.personal_for_id: i.pk for i in Invoice.objects.select_related("team")}
    exports = {}  # each one's statement export, written
    for user in (alice, bob):
        export = statement_export_request(acting=acting_as(user), language="en")
        statement_export_run(export_id=export.pk)
        exports[user.username] = str(export.pk)
    return {
        "token": token,
        "bobs_token": bobs_token,
        "bobs": str(bobs.pk),
        "alices": [str(alices.pk), str(alices.quote_id), str(clusters["fuzz-alice"])],
        "own": {"allocations": str(alices.pk), "quotes": str(alices.quote_id),
                "auth": tokens["spare"], "teams": teams["fuzz-alice"],
                "clusters": str(clusters["fuzz-alice"]), "webhooks": str(hooks["fuzz-alice"]),
                "flags": 0, "ssh-keys": keys["fuzz-alice"], "invoices": invoices[alice.pk],
                "ledger": exports["fuzz-alice"]},
        "other": {"allocations": str(bobs.pk), "quotes": str(bobs.quote_id),
                  "auth": tokens["bobs"], "teams": teams["fuzz-bob"],
                  "clusters": str(clusters["fuzz-bob"]), "webhooks": str(hooks["fuzz-bob"]),
                  "flags": 0, "ssh-keys": keys["fuzz-bob"], "invoices": invoices[bob.pk],
                  "ledger": exports["fuzz-bob"]},
    }  # fmt: skip


def _called_as(case, token, *, scheme="Bearer"):
    """The case's response with this credential, checked for what the API promises: no
    server error, only documented statuses, content types and bodies. (Acceptance checks
    that treat business refusals as schema bugs are not run.)"""
    response = case.call(headers={"Authorization": f"{scheme} {token}"})
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
    return response


FUZZED = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


def _fuzzed_as_alice(case, world, owner):
    """`case` as alice, every {id} the `owner`'s object (hers or bob's): bob's allocation is
    never in what she reads, and never stopped."""
    if "{id}" in case.path and case.path_parameters is not None:
        resource = case.path.split("/")[3]  # /api/v1/<resource>/...
        case.path_parameters = {**case.path_parameters, "id": world[owner][resource]}
    response = _called_as(case, world["token"])
    assert world["bobs"].encode() not in response.content or response.status_code == 404
    assert Allocation.objects.filter(pk=world["bobs"], state="running").exists()


@schema.parametrize()
@FUZZED
def test_api_never_errors_and_documents_every_status(case, two_users):
    _fuzzed_as_alice(case, two_users, "own")


@randomly.include(path_regex=WITH_ID).parametrize()
@FUZZED
def test_the_other_users_object_at_every_id_is_refused_without_an_error(case, two_users):
    _fuzzed_as_alice(case, two_users, "other")


@randomly.exclude(path_regex=WITH_ID).parametrize()
@FUZZED
def test_another_user_reaches_none_of_alices_objects_from_any_operation(case, two_users):
    response = _called_as(case, two_users["bobs_token"])
    assert not [pk for pk in two_users["alices"] if pk.encode() in response.content]
    assert Allocation.objects.filter(pk=two_users["alices"][0], state="running").exists()


def _staff_and_flags(user_model) -> dict:
    """In a world with a fleet: a staff member's token (with the operator permissions, and
    the node changes a node agent's credential asks for) and one open flag of each kind."""
    staff = user_model.objects.create_user("fuzz-staff", is_staff=True)
    codenames = (*OPERATIONS, "change_node")
    staff.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    now, gpu = timezone.now(), Gpu.objects.select_related("node").first()
    flags = [
        Flag.objects.create(
            node=gpu.node, gpu=None if kind == FlagKind.NODE_UNREACHABLE else gpu, kind=kind,
            severity=SEVERITY[kind], opened_at=now, last_seen_at=now,
        )
        for kind in FlagKind
    ]  # fmt: skip
    return {"token": api_token_create(user=staff, name="staff"), "flag": flags[0].pk}


@pytest.fixture
def staff_fleet(two_users, django_user_model):
    """A staff member's token and one open flag of each kind, on the two users' fleet."""
    return _staff_and_flags(django_user_model)


@schema.include(
    path_regex=r"^/api/v1/(flags|nodes|usage|maintenance|allocations/[^/]+/(replace|credit-notes))/"
).parametrize()
@FUZZED
def test_staff_endpoints_never_error_for_staff(case, staff_fleet):
    """The staff-only operations, fuzzed as staff (the test above reaches them only as a
    customer, who is refused before any input is read)."""
    if "{id}" in case.path and case.path_parameters is not None:
        case.path_parameters = {**case.path_parameters, "id": staff_fleet["flag"]}
    response = _called_as(case, staff_fleet["token"])
    assert response.status_code != 403


GET_PATHS = sorted(path for path, item in schema.raw_schema["paths"].items() if "get" in item)
STAFF_PATHS = (
    "/api/v1/flags/", "/api/v1/nodes/", "/api/v1/usage/", "/api/v1/prometheus/",
    "/api/v1/maintenance/", "/api/v1/payments/",
)  # fmt: skip
AGENT_PATHS = ("/api/v1/agent/",)
QUERIES = {"/api/v1/availability/": {"gpu_model": "h100"}}


@pytest.fixture
def whole_world(two_users, django_user_model):
    """The two users' world, with staff, flags and a node agent's credential besides."""
    agent = agent_credential_issue(node=Allocation.objects.get(pk=two_users["bobs"]).node)
    return {**two_users, "staff": _staff_and_flags(django_user_model)["token"], "agent": agent}


@pytest.mark.parametrize("path", GET_PATHS)
def test_every_documented_get_answers_the_body_its_schema_describes(whole_world, path):
    """One real call per GET operation, as its own caller (the customer, staff or a node's
    agent), every {id} the caller's own object: 200, and schemathesis'
    response_schema_conformance on the body (the fuzzing above rarely reaches a 200)."""
    parameters = {}
    if "{id}" in path:
        parameters["id"] = whole_world["own"][path.split("/")[3]]
    if "{slug}" in path:
        parameters["slug"] = "h100"
    case = schema[path]["GET"].Case(path_parameters=parameters, query=QUERIES.get(path))
    if path.startswith(AGENT_PATHS):
        response = _called_as(case, whole_world["agent"], scheme="Agent")
    elif path.startswith(STAFF_PATHS):
        response = _called_as(case, whole_world["staff"])
    else:
        response = _called_as(case, whole_world["token"])
    assert response.status_code == 200, (path, response.text[:500])
