"""Sign-in with a password, for the web form and the API alike: one lockout, one success path.

After `LOCKOUT_THRESHOLD` failures for a username, sign-in is refused for `LOCKOUT_SECONDS`
(counted in Redis, so every web process sees the same count).
"""

from django.contrib.auth import authenticate
from django.core.cache import cache
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.errors import DomainError

LOCKOUT_THRESHOLD = 5
LOCKOUT_SECONDS = 300


class LockedOut(DomainError):
    status = 429
    code = "locked_out"
    title = gettext_lazy("Too many failed sign-ins")


class BadCredentials(DomainError):
    status = 401
    code = "bad_credentials"
    title = gettext_lazy("Wrong username or password")


def _lock_key(username: str) -> str:
    return f"login-failures:{username.lower()[:150]}"


def _locked(username: str) -> bool:
    return cache.get(_lock_key(username), 0) >= LOCKOUT_THRESHOLD


def _failed(username: str) -> None:
    key = _lock_key(username)
    cache.add(key, 0, LOCKOUT_SECONDS)
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, LOCKOUT_SECONDS)


def _succeeded(username: str) -> None:
    cache.delete(_lock_key(username))


def sign_in(request, *, username: str, password: str):
    """The user for these credentials, or LockedOut / BadCredentials; counts every failure."""
    if _locked(username):
        raise LockedOut(_("Too many failed attempts; try again in a few minutes."))
    user = authenticate(request, username=username, password=password)
    if user is None:
        _failed(username)
        raise BadCredentials(_("Wrong username or password."))
    _succeeded(username)
    return user
