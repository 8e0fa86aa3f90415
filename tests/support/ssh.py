"""SSH keys for tests: made in memory (cryptography) or on disk (ssh-keygen), and the real
OpenSSH client."""

import subprocess
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes


def public_line(key: PrivateKeyTypes, comment: str = "alice@laptop") -> str:
    """The key's public half as an authorized_keys line, with `comment`."""
    text = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return f"{text.decode()} {comment}".strip()


def ed25519_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def keypair(tmp_path: Path, name: str) -> tuple[Path, str]:
    """A key pair made by ssh-keygen under `tmp_path`: (private key file, public line)."""
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)],
                   check=True)  # fmt: skip
    return path, path.with_suffix(".pub").read_text().strip()


def ssh(key: Path, port: int, login: str, command: str, *options: str) -> tuple[int, str]:
    """The real OpenSSH client: (exit status, output)."""
    done = subprocess.run(
        ["ssh", "-i", str(key), "-p", str(port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
         *options, f"{login}@127.0.0.1", command],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return done.returncode, done.stdout
