"""Secrets AnchorGPU must read back (a webhook endpoint's signing key), sealed at rest.

Fernet (AES-128-CBC with HMAC-SHA256) under a key derived from `SECRET_KEY`; a value sealed
under a key now in `SECRET_KEY_FALLBACKS` still opens, so the Django key can be rotated the
way Django rotates it. A database dump alone does not give anyone the means to forge our
signatures.
"""

import base64
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

__all__ = ["InvalidToken", "reseal", "seal", "unseal"]


def _derived(secret_key: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"anchorgpu.sealed")
    return Fernet(base64.urlsafe_b64encode(key.derive(secret_key.encode())))


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([_derived(k) for k in keys])


def _current() -> MultiFernet:
    return _fernet((settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS))


def seal(plain: str) -> str:
    return _current().encrypt(plain.encode()).decode()


def reseal(token: str) -> str:
    """The same text sealed under the current key (InvalidToken as for `unseal`)."""
    return _current().rotate(token.encode()).decode()


def unseal(token: str) -> str:
    """The sealed text; InvalidToken when no key in use sealed it (or it was altered)."""
    return _current().decrypt(token.encode()).decode()
