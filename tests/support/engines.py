"""Real Prometheus and VictoriaMetrics (Debian's, `make engines`) on loopback, scraping the
node simulator through our own SD endpoint (`GET /api/v1/prometheus/targets`).

Each engine gets a free port, a data folder of its own and a scrape config whose
`http_sd_configs` points at the test's live server with the SD secret; both listen on
127.0.0.1 only (their default is every interface).
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from anchorgpu.launcher import free_port, wait_for_port

SD_TOKEN = "sd-secret-for-the-tests"
SCRAPE_INTERVAL_S = 5


def _require(binary: str) -> str:
    found = shutil.which(binary)
    assert found, f"{binary} is not installed: `make engines` installs Debian's package"
    return found


def scrape_config(sd_url: str, *, jobs=(("anchorgpu", {}),), refresh: bool = True) -> str:
    """A scrape config whose jobs read our SD endpoint; each job may add static labels (an
    HA pair's `replica`). VictoriaMetrics 1.79 refuses `refresh_interval` in http_sd_configs
    (it takes -promscrape.httpSDCheckInterval instead)."""
    lines = [
        "global:",
        f"  scrape_interval: {SCRAPE_INTERVAL_S}s",
        "  scrape_timeout: 2s",
        "scrape_configs:",
    ]
    for job, labels in jobs:
        lines += [
            f"- job_name: {job}",
            "  http_sd_configs:",
            f"  - url: {sd_url}",
            "    authorization:",
            "      type: Bearer",  # Prometheus 2.42 sends no scheme unless told
            f"      credentials: {SD_TOKEN}",
        ]
        if refresh:
            lines.append("    refresh_interval: 2s")
        if labels:
            lines.append("  relabel_configs:")
            for name, value in labels.items():
                lines += [f"  - target_label: {name}", f"    replacement: {value}"]
    return "\n".join(lines) + "\n"


@dataclass
class Running:
    name: str
    url: str
    process: subprocess.Popen
    folder: Path
    args: list

    def restart(self):
        """Start the same engine again on the same port and data (after `stop`)."""
        self.process = subprocess.Popen(
            self.args, stdout=self.log(), stderr=subprocess.STDOUT, start_new_session=True
        )
        wait_for_port(int(self.url.rsplit(":", 1)[1].split("/")[0]), timeout=30)

    def log(self):
        return open(self.folder / "engine.log", "ab")  # noqa: SIM115 (the child holds it)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def cpu_seconds(self) -> float:
        """The engine process's CPU time so far (user + system)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def flush(self):
        """VictoriaMetrics: make the newest samples searchable now."""
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(f"{self.url}/internal/force_flush", timeout=5)


def _start(name: str, args: list, port: int, folder: Path) -> Running:
    running = Running(name, f"http://127.0.0.1:{port}", None, folder, args)
    running.process = subprocess.Popen(
        args, stdout=running.log(), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_for_port(port, timeout=30)
    except RuntimeError:
        running.stop()
        raise
    return running


@contextlib.contextmanager
def prometheus(sd_url: str | None, *, openmetrics: Path | None = None, **config):
    """Prometheus scraping through our SD endpoint; with no `sd_url` it scrapes nothing and
    serves what `openmetrics` (a file of timestamped samples) holds, backfilled into its
    storage by `promtool tsdb create-blocks-from openmetrics` before it starts."""
    folder = Path(tempfile.mkdtemp(prefix="anchorgpu-prometheus-"))
    if sd_url:
        (folder / "scrape.yml").write_text(scrape_config(sd_url, **config))
    else:
        (folder / "scrape.yml").write_text(f"global:\n  scrape_interval: {SCRAPE_INTERVAL_S}s\n")
    if openmetrics:
        subprocess.run(
            [_require("promtool"), "tsdb", "create-blocks-from", "openmetrics",
             str(openmetrics), str(folder / "data")],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    port = free_port()
    args = [
        _require("prometheus"), f"--config.file={folder / 'scrape.yml'}",
        f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.path={folder / 'data'}",
        "--log.level=warn",
    ]  # fmt: skip
    running = _start("prometheus", args, port, folder)
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def victoria_metrics(sd_url: str | None, *, retention: str = "1d", **config):
    """VictoriaMetrics single-node, scraping itself when `sd_url` is given (else it only
    takes remote writes), keeping samples for `retention`. The newest samples are
    searchable after 1 s, not the default 30 s."""
    folder = Path(tempfile.mkdtemp(prefix="anchorgpu-victoria-"))
    port = free_port()
    args = [
        _require("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}",
        f"-storageDataPath={folder / 'data'}", f"-retentionPeriod={retention}",
        "-search.latencyOffset=1s", "-loggerLevel=WARN",
    ]  # fmt: skip
    if sd_url:
        (folder / "scrape.yml").write_text(scrape_config(sd_url, refresh=False, **config))
        args += [
            f"-promscrape.config={folder / 'scrape.yml'}",
            "-promscrape.httpSDCheckInterval=2s",
        ]
    running = _start("victoria-metrics", args, port, folder)
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def vmagent(sd_url: str, remote_write: str):
    """vmagent scraping through our SD endpoint and writing to `remote_write`, buffering on
    disk while that is down (as an operator's agent in front of a VictoriaMetrics does)."""
    folder = Path(tempfile.mkdtemp(prefix="anchorgpu-vmagent-"))
    (folder / "scrape.yml").write_text(scrape_config(sd_url, refresh=False))
    port = free_port()
    args = [
        _require("vmagent"), f"-httpListenAddr=127.0.0.1:{port}",
        f"-promscrape.config={folder / 'scrape.yml'}", "-promscrape.httpSDCheckInterval=2s",
        f"-remoteWrite.url={remote_write}/api/v1/write",
        f"-remoteWrite.tmpDataPath={folder / 'buffer'}", "-loggerLevel=WARN",
    ]  # fmt: skip
    running = _start("vmagent", args, port, folder)
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(folder, ignore_errors=True)


def wait_until(condition, *, timeout: float, every: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what} did not hold within {timeout:.0f} s")


def targets_up(engine: Running, hostnames) -> bool:
    """Every node's target was scraped and is up."""
    try:
        data = httpx.get(f"{engine.url}/api/v1/targets", timeout=5).json()["data"]
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    up = {
        t["labels"].get("anchorgpu_node")
        for t in data.get("activeTargets", [])
        if t.get("health") == "up"
    }
    return set(hostnames) <= up
