"""Who and from where: pghistory's context for requests and for Celery tasks.

A request that may write (POST, PUT, PATCH, DELETE) runs inside `pghistory.context` with
the user, the client's address (as the sign-in lockout and DRF's throttles see it), the
method and the path. DRF authenticates inside the view, after every middleware: the request
object this middleware hands on tells pghistory the user and the API token the moment DRF
sets them (`request.user`, `request.auth`), before the view writes anything.

A Celery task runs inside a context of its own whose actor is the system and the task's
name (the enforcement pass, notices, impairment sync…); see `task_context`.
"""

import threading

import pghistory
from celery.signals import task_postrun, task_prerun
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.wsgi import WSGIRequest
from pghistory import config, runtime
from pghistory.middleware import DjangoRequest

from accounts.models import ApiToken
from accounts.signin import client_address

SYSTEM = "system"


class _AuditedRequest(DjangoRequest):
    """pghistory's request that follows `request.user`, and also `request.auth`: an API
    token's id goes into the context when DRF's bearer authentication sets it."""

    def __setattr__(self, attr, value):
        if attr == "auth" and isinstance(value, ApiToken):
            pghistory.context(token=value.pk)
        return super().__setattr__(attr, value)


class _AuditedWSGIRequest(_AuditedRequest, WSGIRequest):
    pass


class _AuditedASGIRequest(_AuditedRequest, ASGIRequest):
    pass


class AuditContextMiddleware:
    """Puts who and from where into pghistory's context for every writing request. Sits
    after AuthenticationMiddleware (a session's user is known there)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in config.middleware_methods():
            return self.get_response(request)
        user = getattr(request, "user", None)
        metadata = {
            "user": user.pk if getattr(user, "is_authenticated", False) else None,
            "ip": client_address(request),
            "method": request.method,
            "url": request.path[:500],
        }
        with pghistory.context(**metadata):
            if isinstance(request, WSGIRequest):
                request.__class__ = _AuditedWSGIRequest
            elif isinstance(request, ASGIRequest):
                request.__class__ = _AuditedASGIRequest
            return self.get_response(request)


def system_context(name: str) -> pghistory.context:
    """The context of work nobody asked for in a request: a task, the demo's seeding."""
    return pghistory.context(actor=SYSTEM, task=name)


_tasks = threading.local()


@task_prerun.connect
def _task_context_enter(task_id=None, task=None, **kwargs):
    """Every Celery task writes as "system: <task name>". A task run eagerly inside a request
    (tests, a caller's `.apply()`) joins that request's context instead and keeps its actor."""
    if hasattr(runtime._tracker, "value"):  # inside a request's (or a caller's) context
        return
    stack = getattr(_tasks, "stack", None)
    if stack is None:
        stack = _tasks.stack = {}
    ctx = system_context(task.name)
    ctx.__enter__()
    stack[task_id] = ctx


@task_postrun.connect
def _task_context_exit(task_id=None, **kwargs):
    ctx = getattr(_tasks, "stack", {}).pop(task_id, None)
    if ctx is not None:
        ctx.__exit__(None, None, None)
