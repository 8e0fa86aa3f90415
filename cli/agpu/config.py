"""What agpu keeps between runs, in the user's config folder (`~/.config/agpu`, or
$XDG_CONFIG_HOME/agpu), readable by the user only (folder 700, files 600):

- `config.json`: the last server used and a token per server (a token is only ever sent
  to the server that issued it);
- `pending/`: the Idempotency-Key of each purchase whose answer has not arrived yet, so
  that running the same command again after a timeout retries the same purchase (the
  server answers it once) rather than making a second one.
"""

import contextlib
import hashlib
import json
import os
import time
import uuid
from pathlib import Path

import click

DEFAULT_URL = "http://127.0.0.1:8000"
# Purchases retried after this long are new ones: the server keeps keys 24 hours.
PENDING_HOURS = 23


def folder() -> Path:
    return Path(click.get_app_dir("agpu"))


def _private_folder(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def _write_private(path: Path, data: dict) -> None:
    """Written whole or not at all, mode 600 from its first byte."""
    _private_folder(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def normalized(url: str) -> str:
    return url.rstrip("/")


def load() -> dict:
    return _read(folder() / "config.json")


def server_url(explicit: str | None) -> str:
    """--url, else AGPU_URL, else the server last signed in to, else make run's address."""
    return normalized(explicit or os.environ.get("AGPU_URL") or load().get("url") or DEFAULT_URL)


def stored_session(url: str) -> dict:
    """{token, user, team, team_name, role} kept for `url`, or {}."""
    return load().get("servers", {}).get(normalized(url), {})


def session_store(url: str, session: dict) -> None:
    data = load()
    data["url"] = normalized(url)
    data.setdefault("servers", {})[normalized(url)] = session
    _write_private(folder() / "config.json", data)


def session_forget(url: str) -> bool:
    data = load()
    found = data.get("servers", {}).pop(normalized(url), None) is not None
    if found:
        _write_private(folder() / "config.json", data)
    return found


class Pending:
    """The Idempotency-Key of one purchase (a server, a team and the command's request)
    kept until a final answer: the same command run again reuses it, and what it bought
    with (the quote), so a retry after a timeout buys once."""

    def __init__(self, *, url: str, team, request: dict):
        canonical = json.dumps(
            {"url": normalized(url), "team": team, "request": request}, sort_keys=True
        )
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:32]
        self.path = folder() / "pending" / f"{digest}.json"
        stored = _read(self.path)
        fresh = time.time() - stored.get("created", 0) < PENDING_HOURS * 3600
        self.retrying = bool(stored.get("key")) and fresh
        self.key = stored["key"] if self.retrying else str(uuid.uuid4())
        self.created = stored["created"] if self.retrying else time.time()
        self.state = stored.get("state", {}) if self.retrying else {}

    def keep(self, **state) -> None:
        """Keep the key (and what the retry must send again) before the request goes."""
        self.state.update(state)
        _write_private(self.path, {"key": self.key, "created": self.created, "state": self.state})

    def done(self) -> None:
        """A final answer came: the next run of the command is a new purchase."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
