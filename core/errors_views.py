"""Error pages: problem details under /api/, friendly HTML elsewhere."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from core.problems import problem_json


def _problem(status: int, title: str, code: str) -> JsonResponse:
    return problem_json(status_code=status, title=title, detail=title, code=code)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return _problem(400, "The request could not be read.", "invalid")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return _problem(403, "Not allowed.", "permission_denied")
    return defaults.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return _problem(404, "Not found.", "not_found")
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return _problem(500, "Internal error; nothing was changed.", "server_error")
    return render(request, "500.html", status=500)
