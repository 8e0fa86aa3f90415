"""Production serving refuses unsafe settings unless told the run is local and non-public."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAFE = {
    "DJANGO_SECRET_KEY": "x9!" * 20 + "production-grade-secret-key",
    "DJANGO_DEBUG": "false",
    "DJANGO_SECURE": "true",
    "DJANGO_ALLOWED_HOSTS": "gpu.example.com",
}


def _serve(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")} | env
    return subprocess.run(
        [sys.executable, "-c", "import anchorgpu.wsgi"],
        cwd=ROOT, env=full, capture_output=True, text=True,
    )  # fmt: skip


def test_safe_production_settings_serve():
    assert _serve(**SAFE).returncode == 0


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"DJANGO_DEBUG": "true"}, "DJANGO_DEBUG is on"),
        ({"DJANGO_SECRET_KEY": "short"}, "DJANGO_SECRET_KEY is shorter than 50"),
        ({"DJANGO_SECURE": "false"}, "DJANGO_SECURE is off"),
    ],
)
def test_each_unsafe_setting_stops_the_server_and_is_named(change, named):
    result = _serve(**(SAFE | change))
    assert result.returncode != 0 and named in result.stderr


def test_a_local_run_says_so_explicitly():
    unsafe = SAFE | {"DJANGO_DEBUG": "true", "DJANGO_SECURE": "false"}
    assert _serve(**unsafe, DJANGO_ALLOW_INSECURE="true").returncode == 0
