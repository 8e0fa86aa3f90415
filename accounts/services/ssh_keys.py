"""SSH public keys: parsed by `cryptography`'s OpenSSH loader (never by a pattern), checked,
and kept per person. What a refusal says never repeats what was pasted: a private key
pasted by mistake is neither echoed nor logged."""

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import NoReturn

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from accounts.models import SshKey, SshKeyType
from core.db import savepoint
from core.errors import Invalid, validated

MIN_RSA_BITS = 3072
_CURVES = {"secp256r1": 256, "secp384r1": 384, "secp521r1": 521}


@dataclass(frozen=True)
class ParsedKey:
    key_type: str
    bits: int
    public_key: str  # "<type> <base64>"
    fingerprint: str
    comment: str


def _refuse(message: str) -> NoReturn:
    raise Invalid({"public_key": [message]})


def ssh_key_parse(text: str) -> ParsedKey:
    """One OpenSSH public key line ("ssh-ed25519 AAAA… comment"), or a field error."""
    if len(text.encode()) > SshKey.MAX_TEXT:
        _refuse(_("A public key is a single line of at most 16 KiB; this is longer."))
    if "PRIVATE KEY" in text or "-----BEGIN" in text:
        _refuse(
            _(
                "This is a private key: it was not stored. Never share it; paste the "
                "one-line public key instead (the .pub file, for example ~/.ssh/id_ed25519.pub)."
            )
        )
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        _refuse(_("Paste a public key, such as the contents of ~/.ssh/id_ed25519.pub."))
    if len(lines) > 1:
        _refuse(_("Paste one key per entry; this holds %(n)s lines.") % {"n": len(lines)})
    fields = lines[0].split()
    key_type = fields[0]
    known = set(SshKeyType.values)
    if key_type not in known:
        if any(field in known for field in fields[1:]):
            _refuse(
                _(
                    "Leave out authorized_keys options (such as command= or from=): paste "
                    "the key alone, starting with its type."
                )
            )
        if key_type in ("ssh-dss", "dsa"):
            _refuse(_("DSA keys are not accepted: they are insecure. Use Ed25519."))
        _refuse(_("Not an accepted public key: use Ed25519, ECDSA or RSA of at least 3072 bits."))
    if len(fields) < 2:
        _refuse(_("The key's data is missing after its type."))
    try:
        blob = base64.b64decode(fields[1], validate=True)
        key = serialization.load_ssh_public_key(f"{key_type} {fields[1]}".encode())
    except (binascii.Error, ValueError, UnsupportedAlgorithm):
        _refuse(_("This key's data is damaged: copy the whole line again."))
    bits = _bits(key)
    if isinstance(key, rsa.RSAPublicKey) and bits < MIN_RSA_BITS:
        _refuse(
            _("This RSA key has %(bits)s bits; at least %(min)s are needed (or use Ed25519).")
            % {"bits": bits, "min": MIN_RSA_BITS}
        )
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return ParsedKey(
        key_type=key_type,
        bits=bits,
        public_key=f"{key_type} {fields[1]}",
        fingerprint=f"SHA256:{digest}",
        comment=" ".join(fields[2:])[:100],
    )


def _bits(key: serialization.SSHPublicKeyTypes) -> int:
    if isinstance(key, ed25519.Ed25519PublicKey):
        return 256
    if isinstance(key, ec.EllipticCurvePublicKey):
        return _CURVES[key.curve.name]
    return key.key_size


@transaction.atomic
def ssh_key_add(*, user: User, public_key: str, name: str = "") -> SshKey:
    """A new key of `user`'s, named by `name` or else the key's own comment."""
    parsed = ssh_key_parse(public_key)
    name = (name or "").strip() or parsed.comment or parsed.key_type
    if SshKey.objects.filter(user=user, fingerprint=parsed.fingerprint).exists():
        raise _duplicate(parsed)
    key = SshKey(
        user=user,
        name=name[:100],
        key_type=parsed.key_type,
        bits=parsed.bits,
        public_key=parsed.public_key,
        fingerprint=parsed.fingerprint,
    )
    validated(key, validate_unique=False)
    try:
        with savepoint():
            key.save()
    except IntegrityError as exc:  # the same key added twice at once
        raise _duplicate(parsed) from exc
    return key


def _duplicate(parsed: ParsedKey) -> Invalid:
    return Invalid(
        {
            "public_key": [
                _("You have added this key already (%(fingerprint)s).")
                % {"fingerprint": parsed.fingerprint}
            ]
        }
    )


def ssh_keys_of(*, user: User) -> QuerySet[SshKey]:
    return SshKey.objects.filter(user=user)


@transaction.atomic
def ssh_key_delete(*, user: User, pk: int) -> bool:
    """Remove one of `user`'s keys: every allocation it was chosen for stops taking it, at
    the node's next look at its state."""
    deleted, _rows = SshKey.objects.filter(user=user, pk=pk).delete()
    return bool(deleted)
