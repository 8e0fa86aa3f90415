import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_when_everything_is_up(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": {"status": "ok"}, "redis": {"status": "ok"}}


@pytest.mark.django_db
def test_readyz_names_redis_when_it_is_down(client, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["down"] == ["redis"]
    assert response.json()["checks"]["database"] == {"status": "ok"}


def _manage(*args, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")} | env
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=full, capture_output=True, text=True
    )


def test_check_deploy_is_clean_with_production_settings():
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY="x9!" * 20 + "production-grade-secret-key",
        DJANGO_DEBUG="false",
        DJANGO_SECURE="true",
        DJANGO_ALLOWED_HOSTS="gpu.example.com",
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_missing_setting_fails_fast_with_its_name():
    # manage.py itself falls back to the embedded servers; the settings alone refuse.
    full = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    full |= {
        "DJANGO_SECRET_KEY": "k",
        "DATABASE_URL": "",
        "DJANGO_SETTINGS_MODULE": "anchorgpu.settings",
    }
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=full,
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_bad_setting_value_is_named():
    result = _manage("check", DJANGO_SECRET_KEY="k", QUOTE_VALIDITY_SECONDS="soon")
    assert result.returncode != 0
    assert "QUOTE_VALIDITY_SECONDS" in result.stderr
