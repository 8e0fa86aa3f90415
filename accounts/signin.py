"""Sign-in with a password, for the web form and the API alike: one lockout, one success path.

Every attempt is counted before the password is checked (an atomic increment in Redis), and
the decision is taken on the count that increment returned, so parallel attempts cannot
slip past the threshold. Counts are kept per (username, client address), so nobody can lock
another person out from elsewhere, and per client address, so one address cannot guess
through many usernames. Django's `authenticate()` is the only way to succeed.
"""

import contextlib
import ipaddress

from django.contrib.auth import authenticate
from django.core.cache import cache
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework.throttling import BaseThrottle

from accounts.models import SignIn, SignInMethod
from core.errors import DomainError

LOCKOUT_THRESHOLD = 5  # failures of one username from one address
ADDRESS_THRESHOLD = 20  # failures from one address, whatever the usernames
LOCKOUT_SECONDS = 300


class LockedOut(DomainError):
    status = 429
    code = "locked_out"
    title = gettext_lazy("Too many failed sign-ins")
    retry_after = LOCKOUT_SECONDS


class BadCredentials(DomainError):
    status = 401
    code = "bad_credentials"
    title = gettext_lazy("Wrong username or password")


def client_address(request) -> str:
    """The client's address as DRF's throttles see it: REMOTE_ADDR, or the entry of
    X-Forwarded-For that the trusted proxies (DJANGO_TRUSTED_PROXIES) vouch for."""
    return BaseThrottle().get_ident(request)


def _count(key: str) -> int:
    cache.add(key, 0, LOCKOUT_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 0, LOCKOUT_SECONDS)
        return cache.incr(key)


def sign_in(request, *, username: str, password: str, method: str = SignInMethod.PASSWORD):
    """The user for these credentials, or LockedOut / BadCredentials."""
    address = client_address(request)
    pair = f"signin:{username.lower()[:150]}:{address}"
    per_address = f"signin-address:{address}"
    attempts, from_address = _count(pair), _count(per_address)
    if attempts > LOCKOUT_THRESHOLD or from_address > ADDRESS_THRESHOLD:
        raise LockedOut(_("Too many failed attempts; try again in a few minutes."))
    user = authenticate(request, username=username, password=password)
    if user is None:
        raise BadCredentials(_("Wrong username or password."))
    cache.delete(pair)
    with contextlib.suppress(ValueError):  # the count may have just expired
        cache.decr(per_address)  # a success is not a failure from this address
    SignIn.objects.create(
        user=user,
        method=method,
        address=_valid_address(address),
        user_agent=request.META.get("HTTP_USER_AGENT", "")[:200],
    )
    return user


def _valid_address(address: str) -> str | None:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None
