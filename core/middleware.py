"""Control characters and bodies too large to read, dealt with before any view or query
sees them.

PostgreSQL text cannot hold NUL, and no field of ours means to hold the other C0 controls
(tab, line feed and carriage return excepted). The API refuses such a request (a 400
problem: a script's error is better told than guessed at). A page takes its query and
form values without them, so the person gets the page they asked for, in words (the
glossary says "no match", the sign-in form asks again); a path with one is a 400.
"""

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    QueryDict,
    UnreadablePostError,
)
from django.shortcuts import render
from django.utils.translation import gettext as _
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

from core.errors import DomainError
from core.problems import problem_json, unavailable

if TYPE_CHECKING:
    from django.http.request import _ImmutableQueryDict

CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A \u escape of one of those inside JSON text (not preceded by an escaping backslash).
ESCAPED_CONTROL = re.compile(rb"(?<!\\)(?:\\\\)*\\u00(?:0[0-8bcef]|1[0-9a-f]|7f)", re.I)
FORM = "application/x-www-form-urlencoded"


def _without_control(values: QueryDict) -> "_ImmutableQueryDict":
    """A copy of a QueryDict with the control characters taken out of keys and values."""
    cleaned = values.copy()
    cleaned.clear()
    for key, items in values.lists():
        cleaned.setlist(CONTROL.sub("", key), [CONTROL.sub("", v) for v in items])
    cleaned._mutable = False
    return cast("_ImmutableQueryDict", cleaned)


def _has_any(values: QueryDict) -> bool:
    return any(CONTROL.search(v) for k, vs in values.lists() for v in [k, *vs])


def _cleaned_for_a_page(request: HttpRequest) -> None:
    """Pages: the query and form values without control characters (files untouched)."""
    if _has_any(request.GET):
        request.GET = _without_control(request.GET)
    content_type = request.content_type or ""
    form = content_type == FORM or content_type.startswith("multipart/")
    if request.method == "POST" and form and _has_any(request.POST):
        request.POST = _without_control(request.POST)


def _has_control(request: HttpRequest) -> bool:
    if CONTROL.search(request.path):
        return True
    if not request.path.startswith("/api/"):
        _cleaned_for_a_page(request)
        return False
    if any(CONTROL.search(v) for k, vs in request.GET.lists() for v in [k, *vs]):
        return True
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return False
    content_type = request.content_type or ""
    if content_type == FORM:
        return any(CONTROL.search(v) for k, vs in request.POST.lists() for v in [k, *vs])
    if content_type.endswith("json"):
        body = request.body
        return bool(ESCAPED_CONTROL.search(body) or CONTROL.search(body.decode("latin-1")))
    return False


def _too_large(request: HttpRequest) -> bool:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return False
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return limit is not None and length > limit


class RefuseControlCharacters:
    """Also the first reader of a body: one too large or unreadable is refused here, in
    words (problem details under /api/), before a view or a parser meets it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        try:
            if _too_large(request):
                raise RequestDataTooBig
            control = _has_control(request)
        except RequestDataTooBig:
            return refusal(
                request,
                status=413,
                code="too_large",
                title=_("Request body too large"),
                detail=_("The body is over %(limit)s bytes, the most a request may send.")
                % {"limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE},
            )
        except (SuspiciousOperation, UnreadablePostError):
            return refusal(
                request,
                status=400,
                code="invalid",
                title=_("Invalid input"),
                detail=_("The request body could not be read."),
            )
        if control:
            return refusal(
                request,
                status=400,
                code="invalid",
                title=_("Invalid input"),
                detail=_(
                    "The request contains control characters (such as NUL), which no field accepts."
                ),
            )
        return self.get_response(request)


def refusal(
    request: HttpRequest, *, status: int, code: str, title: object, detail: object
) -> HttpResponse:
    """A refused request in words: problem details under /api/, plain text elsewhere."""
    if request.path.startswith("/api/"):
        return problem_json(status_code=status, title=title, detail=detail, code=code)
    return HttpResponse(str(detail), status=status, content_type="text/plain; charset=utf-8")


class RefusalPage:
    """A refusal (DomainError) that a page view did not turn into its own answer is shown
    in words with its status (403 for a role that may not, 409 for a conflict), never as a
    500. The API answers the same refusals as problem details."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, RedisError | BrokerError):
            exception = unavailable(exception)
        if not isinstance(exception, DomainError) or request.path.startswith("/api/"):
            return None
        context = {"title": exception.title, "detail": exception.detail}
        response = render(request, "refused.html", context, status=exception.status)
        if exception.retry_after:
            response["Retry-After"] = str(exception.retry_after)
        return response
