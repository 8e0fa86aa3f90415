"""RFC 9457 problem details for every API error.

Shape: {type, title, status, detail, code, errors: {field: [message, ...]}, ...extra},
built by `problem_body` alone. Input errors (DRF's, and Django's ValidationError that no
service turned into one) are answered as `Invalid`, like a service's; so no service error
becomes a 500.
"""

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, overload

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.errors import CacheUnavailable, DomainError, Invalid, invalid_from

PROBLEM_CONTENT_TYPE = "application/problem+json"
# An error response in the schema (anchorgpu.schema gives it the problem body).
PROBLEM = OpenApiResponse(description="Problem details (RFC 9457, application/problem+json)")
TYPE_BASE = "/api/docs/#problem-"


def problem_body(
    *,
    status_code: int,
    title: object,
    detail: object,
    code: str,
    errors: Mapping[str, list[str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The one problem-details body every error answer carries (the API's handler, the
    middleware's refusals, the error views, the processor's webhook)."""
    body: dict[str, Any] = {
        "type": f"{TYPE_BASE}{code}",
        "title": str(title),
        "status": status_code,
        "detail": str(detail),
        "code": code,
    }
    if errors:
        body["errors"] = errors
    body.update(extra)
    return body


def problem_response(
    *,
    status_code: int,
    title: object,
    detail: object,
    code: str,
    errors: Mapping[str, list[str]] | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> Response:
    """A problem from a DRF view (DRF renders it)."""
    body = problem_body(
        status_code=status_code, title=title, detail=detail, code=code, errors=errors, **extra
    )
    return Response(body, status=status_code, headers=headers, content_type=PROBLEM_CONTENT_TYPE)


def problem_json(*, status_code: int, title: object, detail: object, code: str) -> JsonResponse:
    """A problem from outside DRF: middleware, Django's error views, plain views."""
    body = problem_body(status_code=status_code, title=title, detail=detail, code=code)
    return JsonResponse(body, status=status_code, content_type=PROBLEM_CONTENT_TYPE)


def domain_error_response(exc: DomainError) -> Response:
    """The problem response for a refused operation; also what idempotency stores."""
    return problem_response(
        status_code=exc.status,
        title=exc.title,
        detail=exc.detail,
        code=exc.code,
        errors=exc.field_errors() or None,
        headers={"Retry-After": str(exc.retry_after)} if exc.retry_after else None,
        **exc.extra,
    )


def unavailable(exc: Exception) -> CacheUnavailable:
    return CacheUnavailable(
        _("A part of AnchorGPU (Redis) does not answer; nothing was changed. Try again soon.")
    )


@overload
def _flatten(detail: dict[str, Any]) -> dict[str, list[str]]: ...
@overload
def _flatten(detail: object) -> dict[str, list[str]] | list[str]: ...
def _flatten(detail: object) -> dict[str, list[str]] | list[str]:
    """DRF error detail (dict/list/str, nested) → {field: [messages]}."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for field, value in detail.items():
            nested = _flatten(value)
            if isinstance(nested, dict):
                for sub, messages in nested.items():
                    key = field if sub == "non_field_errors" else f"{field}.{sub}"
                    out.setdefault(key, []).extend(messages)
            else:
                out[field] = nested
        return out
    if isinstance(detail, list):
        if any(isinstance(item, dict) for item in detail):
            out = {}
            for index, item in enumerate(detail):
                for sub, messages in _flatten(item).items():
                    out.setdefault(f"{index}.{sub}", []).extend(messages)
            return out
        return [str(item) for item in detail]
    return [str(detail)]


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RedisError | BrokerError):  # what a fail-open cache did not absorb
        exc = unavailable(exc)
    if isinstance(exc, DomainError):
        return domain_error_response(exc)
    if isinstance(exc, DjangoValidationError):  # one that no service turned into Invalid
        return domain_error_response(invalid_from(exc))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return None  # DRF answers its own exceptions only, the ones turned into them above
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        return domain_error_response(Invalid(errors))
    shown = exc.detail if isinstance(exc.detail, str) else _flatten(exc.detail)
    code = getattr(exc, "default_code", "error")
    title = str(getattr(exc, "default_detail", "")) or _("Error")
    if "{" in title:  # a template DRF fills in for the detail ("{media_type}"): not a title
        title = HTTPStatus(response.status_code).phrase
    return problem_response(
        status_code=response.status_code,
        title=_(title),
        detail=shown if isinstance(shown, str) else str(shown),
        code=code,
        headers={k: v for k, v in response.items() if k in ("Retry-After", "WWW-Authenticate")},
    )
