"""`manage.py <command>` with no DATABASE_URL / REDIS_URL: it starts the embedded servers
when nothing runs, and joins `make run`'s when it does."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOW = "from django.conf import settings; print('redis=' + settings.CACHES['default']['LOCATION'])"


def _env(data_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return env | {"ANCHORGPU_DATA_DIR": str(data_dir), "DJANGO_SECRET_KEY": ""}


def _manage(env, *args):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=240,
    )  # fmt: skip


@pytest.mark.slow
def test_a_command_runs_on_the_embedded_servers_with_nothing_set(tmp_path):
    env = _env(tmp_path)
    done = _manage(env, "showmigrations", "webhooks")
    assert done.returncode == 0, done.stderr
    assert "0001_initial" in done.stdout and "[anchorgpu]" not in done.stdout
    assert "starting embedded PostgreSQL" in done.stderr
    assert (tmp_path / "secret_key").exists() and not (tmp_path / "redis.url").exists()


@pytest.mark.slow
def test_a_command_joins_the_redis_of_a_running_make_run(tmp_path):
    script = textwrap.dedent(f"""
        import subprocess, sys
        from anchorgpu.launcher import services
        with services(share="announce") as env:
            print("announced=" + env["REDIS_URL"], flush=True)
            child = {{k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}}
            subprocess.run([sys.executable, "manage.py", "shell", "-c", {SHOW!r}],
                           env=child, check=True)
    """)  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=_env(tmp_path), capture_output=True,
        text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
    assert lines["redis"].startswith(lines["announced"].rstrip("/0"))
    assert done.stderr.count("starting embedded Redis") == 1  # the command started none
