"""The `Authorization: <scheme> <credential>` header, read one way for every credential the
API takes (accounts' bearer tokens, telemetry's node agents)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions
from rest_framework.request import Request

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


def authorization_credential(request: Request, scheme: str, *, invalid: StrOrPromise) -> str | None:
    """The credential a request sends as `Authorization: <scheme> <credential>`; None when it
    sends another scheme or none. A malformed header is refused; `invalid` says why when the
    credential is not text."""
    header = authentication.get_authorization_header(request).split()
    if not header or header[0].lower() != scheme.lower().encode():
        return None
    if len(header) != 2:
        raise exceptions.AuthenticationFailed(_("Invalid Authorization header."))
    try:
        return header[1].decode()
    except UnicodeError as exc:
        raise exceptions.AuthenticationFailed(invalid) from exc
