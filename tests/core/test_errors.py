"""One error model: services refuse with DomainErrors (Invalid keeps the field errors of a
full_clean() or any other check), pages and the API answer them, and every problem-details
body is built by core.problems.problem_body."""

import json

import pytest
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.test import RequestFactory
from rest_framework import exceptions

from accounts.models import Profile
from accounts.services.profile import account_preferences_set
from core import errors_views
from core.errors import NON_FIELD, DomainError, Invalid, invalid_from
from core.middleware import refusal
from core.problems import PROBLEM_CONTENT_TYPE, TYPE_BASE, problem_exception_handler
from payments.webhooks import _problem as webhook_problem
from rentals.errors import ReadOnly
from rentals.models import Allocation
from tests.support.booking import book

PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def test_invalid_keeps_every_field_error_and_words_the_first_as_its_detail():
    exc = Invalid({"gpu_count": ["too many", "and odd"], "period": "unknown"})
    assert isinstance(exc, DomainError) and exc.status == 400 and exc.code == "invalid"
    assert exc.errors == {"gpu_count": ["too many", "and odd"], "period": ["unknown"]}
    assert exc.detail == "too many"
    assert exc.messages == ["too many", "and odd", "unknown"]
    assert exc.field_errors() == exc.errors
    assert Invalid("just wrong").errors == {NON_FIELD: ["just wrong"]}


def test_a_validation_error_becomes_invalid_with_its_fields_kept():
    by_field = DjangoValidationError({"time_zone": ["bad zone"], NON_FIELD_ERRORS: ["both"]})
    assert invalid_from(by_field).errors == {"time_zone": ["bad zone"], "__all__": ["both"]}
    plain = DjangoValidationError(["one", "two"])
    assert invalid_from(plain).errors == {NON_FIELD: ["one", "two"]}


def test_a_full_clean_failure_in_a_service_is_invalid_with_its_field(alice):
    before = Profile.objects.get_or_create(user=alice)[0].time_zone
    with pytest.raises(Invalid) as refused:
        account_preferences_set(user=alice, time_zone="Mars/Olympus_Mons")
    assert list(refused.value.errors) == ["time_zone"]
    assert "Mars/Olympus_Mons" in refused.value.errors["time_zone"][0]
    assert Profile.objects.get(user=alice).time_zone == before  # nothing changed


def _handled(exc: Exception) -> dict:
    response = problem_exception_handler(exc, {})
    assert response is not None
    assert response.status_code == 400 and response.content_type == PROBLEM_CONTENT_TYPE
    return response.data


def test_the_api_answers_invalid_as_it_answers_input_errors():
    """A service's Invalid, a stray Django ValidationError and DRF's own: one body."""
    fields = {"gpu_count": ["too many"], "period": ["unknown"]}
    expected = {
        "type": f"{TYPE_BASE}invalid", "title": "Invalid input", "status": 400,
        "detail": "too many", "code": "invalid", "errors": fields,
    }  # fmt: skip
    assert _handled(Invalid(fields)) == expected
    assert _handled(DjangoValidationError(fields)) == expected
    assert _handled(exceptions.ValidationError(fields)) == expected
    assert _handled(Invalid("no field"))["errors"] == {NON_FIELD: ["no field"]}
    assert _handled(DjangoValidationError("no field"))["errors"] == {NON_FIELD: ["no field"]}


def test_every_problem_producer_gives_the_same_shape(rf: RequestFactory):
    """The API's handler, the middleware's refusal, the error views and the processor's
    webhook: each body is problem_body's, with its content type."""
    request = rf.get("/api/v1/nowhere/")
    drf = problem_exception_handler(exceptions.NotFound(), {})
    assert drf is not None
    bodies = [
        (drf.content_type, dict(drf.data)),
        *(
            (r["Content-Type"], json.loads(r.content))
            for r in (
                refusal(request, status=413, code="too_large", title="Too large", detail="Big"),
                errors_views.not_found(request, Exception()),
                webhook_problem(400, "signature_invalid", "Bad signature"),
            )
        ),
    ]
    for content_type, body in bodies:
        assert content_type == PROBLEM_CONTENT_TYPE
        assert set(body) == PROBLEM_KEYS
        assert body["type"] == f"{TYPE_BASE}{body['code']}"
        assert isinstance(body["status"], int)
    assert bodies[1][1] == {
        "type": f"{TYPE_BASE}too_large", "title": "Too large", "status": 413,
        "detail": "Big", "code": "too_large",
    }  # fmt: skip


def test_a_service_refusal_is_a_field_error_on_the_page_and_in_the_api(client, alice_api):
    asked = {"framework": "pytorch", "version": "0.0.1"}
    page = client.get("/compatibility/", asked)
    assert page.status_code == 200
    assert "0.0.1" in page.context["form"].errors["version"][0]
    api = alice_api.post("/api/v1/compatibility/", asked, format="json")
    assert api.status_code == 400 and api["Content-Type"] == PROBLEM_CONTENT_TYPE
    problem = api.json()
    assert list(problem["errors"]) == ["version"] and problem["code"] == "invalid"
    assert problem["detail"] == problem["errors"]["version"][0]


STAFF_WORDS = "Staff can read every allocation but change none."


def test_staff_are_refused_in_the_same_words_on_the_page_and_in_the_api(
    catalog, alice, staff, client, staff_api
):
    allocation = book(alice, model="l4", count=1, period="day")
    api = staff_api.post(f"/api/v1/allocations/{allocation.pk}/stop/")
    assert api.status_code == 403 and api["Content-Type"] == PROBLEM_CONTENT_TYPE
    assert api.json() == {
        "type": f"{TYPE_BASE}permission_denied", "title": str(ReadOnly.title), "status": 403,
        "detail": STAFF_WORDS, "code": "permission_denied",
    }  # fmt: skip
    client.force_login(staff)
    page = client.post(f"/allocations/{allocation.pk}/stop/")
    assert page.status_code == 302
    assert [str(m) for m in page.wsgi_request._messages] == [STAFF_WORDS]
    assert Allocation.objects.get(pk=allocation.pk).state == allocation.state  # unchanged
