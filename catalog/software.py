"""A node's software stack: versions read as versions, and what a node's agent reports.

Versions are dotted numbers compared part by part (12.10 > 12.9, 550.54.15 < 550.127.05),
never as strings. A version's key is its parts as integers with trailing zeros dropped, so
12.8 and 12.8.0 are one version; the database keeps the key beside the text (an integer
array, which PostgreSQL orders the same way), so availability and placement compare in SQL.
"""

import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

_VERSION = re.compile(r"^\d{1,6}(\.\d{1,6}){0,3}$")
VERSION_MAX_LENGTH = 40


def version_key(text: str) -> list[int]:
    """The version's parts as integers, trailing zeros dropped; ValueError if it is not a
    dotted number (`12.8`, `580.65.06`)."""
    text = (text or "").strip()
    if not _VERSION.match(text):
        raise ValueError(text)
    parts = [int(part) for part in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return parts


def version_or_none(text: str | None) -> str | None:
    """The version as reported, if it reads as one; None for empty, "N/A" and the like."""
    text = (text or "").strip()
    try:
        version_key(text)
    except ValueError:
        return None
    return text


def version_at_least(version: str | None, minimum: str) -> bool:
    """Whether `version` meets `minimum`; an unknown version never does."""
    if not version:
        return False
    return version_key(version) >= version_key(minimum)


def validate_version(value: str) -> None:
    try:
        version_key(value)
    except ValueError as exc:
        raise ValidationError(
            _("Enter a version as dotted numbers, e.g. 12.8 or 550.54.15."), code="version"
        ) from exc


# What a booking may require of its node's stack: a minimum driver, CUDA or ROCm version.
REQUIRES = ("requires_driver", "requires_cuda", "requires_rocm")
_STACK_FIELD = {"requires_driver": "driver", "requires_cuda": "cuda", "requires_rocm": "rocm"}


@dataclass(frozen=True)
class Requires:
    """Minimum versions a booking asks of its node; empty strings ask nothing."""

    driver: str = ""
    cuda: str = ""
    rocm: str = ""

    def __bool__(self) -> bool:
        return bool(self.driver or self.cuda or self.rocm)

    @classmethod
    def of(cls, data) -> "Requires":
        """From a mapping (or object) with `requires_driver`, `requires_cuda`,
        `requires_rocm`."""
        get = data.get if hasattr(data, "get") else (lambda k, d="": getattr(data, k, d))
        return cls(**{_STACK_FIELD[name]: (get(name, "") or "").strip() for name in REQUIRES})

    def as_fields(self) -> dict[str, str]:
        return {"requires_driver": self.driver, "requires_cuda": self.cuda,
                "requires_rocm": self.rocm}  # fmt: skip

    def params(self) -> dict:
        """The SQL parameters `rentals.sql.capacity.stack_meets` reads: each minimum's key, or None."""
        return {
            "min_driver": version_key(self.driver) if self.driver else None,
            "min_cuda": version_key(self.cuda) if self.cuda else None,
            "min_rocm": version_key(self.rocm) if self.rocm else None,
        }

    def met_by(self, *, driver: str | None, cuda: str | None, rocm: str | None) -> bool:
        """The same rule in Python: every minimum named is met; an unknown version meets none."""
        return all(
            not minimum or version_at_least(have, minimum)
            for minimum, have in ((self.driver, driver), (self.cuda, cuda), (self.rocm, rocm))
        )

    def words(self) -> str:
        parts = []
        if self.driver:
            parts.append(_("driver ≥ %(v)s") % {"v": self.driver})
        if self.cuda:
            parts.append(_("CUDA ≥ %(v)s") % {"v": self.cuda})
        if self.rocm:
            parts.append(_("ROCm ≥ %(v)s") % {"v": self.rocm})
        return ", ".join(str(p) for p in parts)


NO_REQUIRES = Requires()


def version_error(value: str) -> str | None:
    """Why `value` is not a version, in words, or None."""
    try:
        version_key(value)
    except ValueError:
        return _("“%(value)s” is not a version: use dotted numbers, e.g. 12.8 or 550.54.15.") % {
            "value": value[:40]
        }
    return None


def requires_errors(data) -> dict[str, str]:
    """Field errors for malformed `requires_*` values (empty ones ask nothing)."""
    errors = {}
    for name in REQUIRES:
        value = (data.get(name) or "").strip()
        if value and (error := version_error(value)):
            errors[name] = error
    return errors


# --- a node's report ---------------------------------------------------------------------


def _text(value, limit: int = 200) -> str:
    return str(value or "").strip()[:limit]


def stack_from_report(report: dict) -> dict:
    """The stack as the console keeps it, from an agent's `software` report: the versions
    that read as versions (anything else is unknown, never a guess), the OS, the kernel and
    each GPU's name and compute capability or gfx target."""
    report = report or {}
    gpus = []
    for gpu in (report.get("gpus") or [])[:64]:
        if not isinstance(gpu, dict):
            continue
        gpus.append(
            {
                "index": gpu.get("index") if isinstance(gpu.get("index"), int) else None,
                "name": _text(gpu.get("name"), 80),
                "compute_cap": version_or_none(gpu.get("compute_cap")) or "",
                "gfx_target": _text(gpu.get("gfx_target"), 20)
                if re.fullmatch(r"gfx[0-9a-f]{3,4}", _text(gpu.get("gfx_target"), 20))
                else "",
            }
        )
    return {
        "vendor": report.get("vendor") if report.get("vendor") in ("nvidia", "amd") else "",
        "driver": version_or_none(report.get("driver")) or "",
        "cuda": version_or_none(report.get("cuda")) or "",
        "rocm": version_or_none(report.get("rocm")) or "",
        "amdgpu": version_or_none(report.get("amdgpu")) or "",
        "os": _text(report.get("os"), 120),
        "kernel": _text(report.get("kernel"), 120),
        "gpus": gpus,
    }


def node_driver_disagrees(node) -> bool:
    """The exporter's driver label names another version than the agent reported: staff see
    both; the agent's is the one the console uses."""
    theirs, ours = node.exporter_driver_version, node.driver_version
    return bool(theirs and ours) and version_key(theirs) != version_key(ours)
