"""View decorators for the console's own pages (the admin keeps Django's)."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied


def staff_required(view):
    """Staff pages: a visitor is sent to sign in (and back), a signed-in customer gets our
    403 page saying it is for staff, never the admin's sign-in form."""

    @login_required
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return guarded
