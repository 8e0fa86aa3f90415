"""View decorators for the console's own pages (the admin keeps Django's)."""

from collections.abc import Callable
from functools import wraps
from typing import Concatenate, ParamSpec

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase

P = ParamSpec("P")
View = Callable[Concatenate[HttpRequest, P], HttpResponseBase]


def staff_required(view: View[P]) -> View[P]:
    """Staff pages: a visitor is sent to sign in (and back), a signed-in customer gets our
    403 page saying it is for staff, never the admin's sign-in form."""

    @login_required
    @wraps(view)
    def guarded(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return guarded
