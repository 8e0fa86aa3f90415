"""Sign-in with a password and, for who has one, a second factor, for the web form and the
API alike: one lockout per step, one success path.

Every attempt is counted before the password is checked (an atomic increment in Redis), and
the decision is taken on the count that increment returned, so parallel attempts cannot
slip past the threshold. Password counts are kept per (username, client address), so nobody
can lock another person out from elsewhere, and per client address, so one address cannot
guess through many usernames. Second-factor counts are kept per user and per address: five
wrong codes lock that user's second step for a while. The counts live in Redis, so a
restart keeps them. Django's `authenticate()` is the only way past the password.
"""

import contextlib
import ipaddress
from typing import cast

from allauth.mfa import app_settings as mfa_settings
from allauth.mfa.models import Authenticator
from django.contrib.auth import authenticate
from django.core.cache import cache as default_cache
from django.utils.translation import gettext as _
from rest_framework.throttling import BaseThrottle

from accounts.errors import (
    BadCredentials,
    EmailUnverified,
    LockedOut,
    SecondFactorMissing,
    SecondFactorWrong,
)
from accounts.models import SignIn, SignInMethod
from accounts.selectors import email_confirmed
from core.cache import RedisCache

LOCKOUT_THRESHOLD = 5  # failures of one username from one address
ADDRESS_THRESHOLD = 20  # failures from one address, whatever the usernames
LOCKOUT_SECONDS = LockedOut.retry_after
SECOND_FACTOR_THRESHOLD = 5  # wrong codes for one user, from anywhere
cache = cast(RedisCache, default_cache)  # settings.CACHES: the default cache is core.cache's


def client_address(request) -> str:
    """The client's address as DRF's throttles see it: REMOTE_ADDR, or the entry of
    X-Forwarded-For that the trusted proxies (DJANGO_TRUSTED_PROXIES) vouch for."""
    return BaseThrottle().get_ident(request)


def _count(key: str) -> int:
    """Count one attempt. Without Redis the count cannot be kept, so the attempt is refused
    (core.errors.CacheUnavailable, a 503): sign-in fails closed."""
    cache.strict.add(key, 0, LOCKOUT_SECONDS)
    try:
        return cache.strict.incr(key)
    except ValueError:  # expired between add and incr
        cache.strict.add(key, 0, LOCKOUT_SECONDS)
        return cache.strict.incr(key)


def password_check(request, *, username: str, password: str):
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
    cache.strict.delete(pair)
    with contextlib.suppress(ValueError):  # the count may have just expired
        cache.strict.decr(per_address)  # a success is not a failure from this address
    return user


def second_factor_check(request, *, user, code: str | None) -> Authenticator:
    """The authenticator that takes `code` (a current TOTP code, never one used before, or
    an unused recovery code), counted like passwords: per user, whatever the address (only
    someone who knows the password gets here), and per address."""
    per_user = f"second-factor:{user.pk}"
    per_address = f"second-factor-address:{client_address(request)}"
    attempts, from_address = _count(per_user), _count(per_address)
    if attempts > SECOND_FACTOR_THRESHOLD or from_address > ADDRESS_THRESHOLD:
        raise LockedOut(_("Too many failed attempts; try again in a few minutes."))
    code = (code or "").strip()
    if not code:
        raise SecondFactorMissing(
            _(
                "This account signs in with a second factor: send a current code from the "
                "authenticator app, or a recovery code, in otp."
            ),
            field="otp",
        )
    authenticator = _second_factor_match(user, code)
    if authenticator is None:
        raise SecondFactorWrong(_("Wrong or already used code."), field="otp")
    cache.strict.delete(per_user)
    with contextlib.suppress(ValueError):
        cache.strict.decr(per_address)
    return authenticator


def _second_factor_match(user, code: str) -> Authenticator | None:
    for authenticator in Authenticator.objects.filter(
        user=user, type__in=[Authenticator.Type.TOTP, Authenticator.Type.RECOVERY_CODES]
    ):
        if not authenticator.wrap().validate_code(code):
            continue
        if authenticator.type == Authenticator.Type.TOTP and not second_factor_code_spend(
            user=user, code=code
        ):
            return None
        return authenticator
    return None


def second_factor_code_spend(*, user, code: str) -> bool:
    """Mark a TOTP code used (the one that turned TOTP on, too): False if it was already.
    Kept past the code's whole validity, tolerance included."""
    lifetime = mfa_settings.TOTP_PERIOD * (2 * mfa_settings.TOTP_TOLERANCE + 2)
    return cache.strict.add(f"second-factor-used:{user.pk}:{code.replace(' ', '')}", 1, lifetime)


def has_second_factor(user) -> bool:
    return Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()


def sign_in_record(request, *, user, method: str) -> None:
    SignIn.objects.create(
        user=user,
        method=method,
        address=_valid_address(client_address(request)),
        user_agent=request.META.get("HTTP_USER_AGENT", "")[:200],
    )


def sign_in(request, *, username: str, password: str, otp: str | None = None):
    """An API client's sign-in: the password, a confirmed address (as on the web), then the
    second factor for a user who has one, each counted toward its lockout; the sign-in
    recorded once all held."""
    user = password_check(request, username=username, password=password)
    if not email_confirmed(user=user):  # as the web sign-in: no way in before confirming
        raise EmailUnverified(
            _(
                "Confirm your e-mail address before you create an API token: open the link "
                "we sent you, or sign in on the web to have it sent again."
            )
        )
    method = SignInMethod.API
    if has_second_factor(user):
        second_factor_check(request, user=user, code=otp)
        method = SignInMethod.API_SECOND_FACTOR
    sign_in_record(request, user=user, method=method)
    return user


def _valid_address(address: str) -> str | None:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None
