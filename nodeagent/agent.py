"""The reconcile loop: desired state in, report out.

Each round fetches the node's state (an ETag makes an unchanged one a 304), keeps it on
disk, makes the machine match it and reports what it did. It trusts nothing it remembers:
every round starts from the state file and from what the machine has, so a crash at any
point is repaired by the next round. When AnchorGPU cannot be reached it goes on with the
last state it read, and still takes access away at `paid_until` by its own clock.
"""

import argparse
import functools
import json
import logging
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from http.client import HTTPResponse
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from nodeagent import TENANT_PREFIX, VERSION, HostError, cgroups, node_config, software
from nodeagent.cgroups import Confinement
from nodeagent.devices import discover, inventory_from_file
from nodeagent.hosts import FolderHost, Grant, Host, Layout, LinuxHost
from nodeagent.systemd import SystemdSlices

logger = logging.getLogger("nodeagent")


# The node's state as AnchorGPU sends it (GET /api/v1/agent/state/, the agent API's
# AgentStateSerializer); what a console older than the agent may leave out is NotRequired.
class GpuEntry(TypedDict):
    index: int
    uuid: str


class Entry(TypedDict):
    """One allocation on the node; times are ISO 8601."""

    id: str
    login: str
    granted: bool
    paid_from: str
    paid_until: str
    gpus: list[GpuEntry]
    keys: list[str]
    cpus: NotRequired[float | None]
    memory_mib: NotRequired[int | None]


class State(TypedDict):
    generation: str
    gpu_variable: NotRequired[str]
    allocations: NotRequired[list[Entry]]


@dataclass
class Round:
    """What one round did: the generation it worked from, the allocations now in place,
    the errors it met, and whether the state came fresh from AnchorGPU."""

    generation: str = ""
    applied: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    fetched: bool = False


def _when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _write(path: Path, data: object) -> None:
    """Whole or not at all: a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.")
    with os.fdopen(fd, "w") as out:
        json.dump(data, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


class Agent:
    def __init__(self, *, url: str, credential: str, host: Host, state_dir: Path,
                 clock: Callable[[], float] = time.time, timeout: float = 10.0,
                 stack: Callable[[], dict[str, Any]] | None = None) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.credential = credential
        self.host = host
        self.state_file = Path(state_dir) / "state.json"
        self.reported_file = Path(state_dir) / "reported.json"
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.timeout = timeout
        # The node's software stack (nodeagent.software.stack), or None to report none
        self.stack = stack

    # --- talking to AnchorGPU -----------------------------------------------------------------
    def _request(
        self, path: str, *, body: dict[str, Any] | None = None, etag: str = ""
    ) -> HTTPResponse:
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method="POST" if body is not None else "GET",
            headers={"Authorization": f"Agent {self.credential}", "Accept": "application/json",
                     "User-Agent": VERSION, "Content-Type": "application/json"},
        )  # fmt: skip
        if etag:
            request.add_header("If-None-Match", f'"{etag}"')
        response: HTTPResponse = urllib.request.urlopen(request, timeout=self.timeout)
        return response

    def _cached(self) -> State | None:
        try:
            state: State = json.loads(self.state_file.read_text())
            return state
        except (OSError, ValueError):
            return None

    def fetch(self) -> tuple[State | None, bool]:
        """(state, fresh): AnchorGPU's answer, or the last one kept when it cannot answer."""
        cached = self._cached()
        try:
            with self._request(
                "/api/v1/agent/state/", etag=cached.get("generation", "") if cached else ""
            ) as r:
                state = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 304 and cached is not None:
                return cached, True
            logger.warning("state: HTTP %s; going on with the last state kept", exc.code)
            return cached, False
        except (OSError, ValueError) as exc:
            logger.warning("state: %s; going on with the last state kept", exc)
            return cached, False
        _write(self.state_file, state)
        return state, True

    def report(self, result: Round) -> None:
        """Say what this round did, unless it is exactly what was last said (an unchanged
        state, applied the same way: most rounds). A lost record only means saying it again."""
        body: dict[str, Any] = {"generation": result.generation, "applied": result.applied,
                "errors": result.errors, "agent": VERSION}  # fmt: skip
        if self.stack is not None:
            try:
                body["software"] = self.stack()
            except Exception:  # a tool that misbehaves costs the stack, never the report
                logger.exception("software stack")
        try:
            if json.loads(self.reported_file.read_text()) == body:
                return
        except (OSError, ValueError):
            pass
        try:
            with self._request("/api/v1/agent/report/", body=body):
                pass
        except (OSError, urllib.error.HTTPError) as exc:
            logger.warning("report: %s", exc)
            return
        _write(self.reported_file, body)

    # --- making the machine match ---------------------------------------------------------------
    def reconcile(self, state: State | None) -> Round:
        """Make the host match `state` as of now. With no state at all (first start in an
        outage, the state file lost) every access is taken away and nothing is wiped: a
        node that cannot hear from AnchorGPU grants nothing, and deletes nobody's data on a
        guess."""
        now = self.clock()
        result = Round(generation=state.get("generation", "") if state else "")
        if state is None:
            for login in sorted(self.host.accounts()):
                self._step(result, None, self.host.revoke, login)
            return result
        wanted: dict[str, Entry] = {}
        for entry in state.get("allocations", []):
            if _when(entry["paid_until"]) > now:  # past paid_until it goes, whatever was said
                wanted[entry["login"]] = entry
        variable = state.get("gpu_variable", "CUDA_VISIBLE_DEVICES")
        for login in sorted(set(self.host.accounts()) - set(wanted)):
            self._step(result, None, self.host.wipe, login)
        self._step(result, None, self.host.tidy)
        short = self._beyond_capacity(wanted.values())
        for login, entry in sorted(wanted.items()):
            if not self._step(result, entry, self.host.create, login, entry["id"]):
                continue
            live = entry["granted"] and _when(entry["paid_from"]) <= now
            if live:
                grant = Grant(
                    keys=entry["keys"], gpus=[(g["index"], g["uuid"]) for g in entry["gpus"]],
                    variable=variable, cpus=entry.get("cpus"), memory_mib=entry.get("memory_mib"),
                )  # fmt: skip
                done = self._step(result, entry, self.host.grant, login, grant)
            else:
                done = self._step(result, entry, self.host.revoke, login)
            if login in short:  # confined and let in, but short of what was sold
                result.errors.append({"allocation": entry["id"], "detail": short[login]})
                logger.warning("%s: %s", login, short[login])
            elif done:
                result.applied.append(entry["id"])
        return result

    def _beyond_capacity(self, entries: Iterable[Entry]) -> dict[str, str]:
        """{login: why} for the allocations this node cannot give their CPU or memory share:
        those that, taken by start (then id), pass what the node has."""
        capacity = self.host.capacity()
        if capacity is None:
            return {}
        cpus, memory = capacity
        short: dict[str, str] = {}
        used_cpus, used_mib = 0.0, 0
        for entry in sorted(entries, key=lambda e: (e["paid_from"], e["id"])):
            used_cpus += entry.get("cpus") or 0
            used_mib += entry.get("memory_mib") or 0
            if used_cpus > cpus or used_mib * 1024 * 1024 > memory:
                short[entry["login"]] = (
                    f"this node has {cpus} CPUs and {memory // 2**30} GiB of memory; its "
                    f"allocations need {used_cpus:g} CPUs and {used_mib // 1024} GiB up to "
                    "this one"
                )
        return short

    @staticmethod
    def _step(
        result: Round, entry: Entry | None, action: Callable[..., object], *args: object
    ) -> bool:
        try:
            action(*args)
            return True
        except (HostError, OSError) as exc:
            allocation = entry["id"] if entry else None
            result.errors.append({"allocation": allocation, "detail": str(exc)[:500]})
            logger.error("%s %s: %s", action.__name__, args[0] if args else "", exc)
            return False

    def run_once(self) -> Round:
        state, fresh = self.fetch()
        result = self.reconcile(state)
        result.fetched = fresh
        if fresh and state is not None:
            self.report(result)
        return result

    def run(self, *, interval: float = 10.0, stop: threading.Event | None = None) -> None:
        while not (stop and stop.is_set()):
            started = self.clock()
            try:
                self.run_once()
            except Exception:  # a round that fails is retried; the agent never stops
                logger.exception("round failed")
            pause = max(0.5, interval - (self.clock() - started))
            if stop:
                stop.wait(pause)
            else:
                time.sleep(pause)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["config"]:
        return _config(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m nodeagent", description=__doc__)
    parser.add_argument("--url", required=True, help="AnchorGPU's address, https://console…")
    parser.add_argument("--credential-file", required=True, type=Path,
                        help="the node's agent credential (issued by staff), one line")  # fmt: skip
    parser.add_argument("--state-dir", type=Path, default=Path("/var/lib/anchorgpu-agent"))
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--prefix", default=TENANT_PREFIX, help="the tenants' login prefix")
    parser.add_argument("--cgroups", choices=["auto", "systemd", "v2", "v1"], default="auto",
                        help="how sessions are confined (auto: systemd where it runs the "
                             "host, else the cgroup kind the host mounts)")  # fmt: skip
    parser.add_argument("--devices", type=Path,
                        help="a file naming each GPU's device nodes, instead of asking the "
                             "driver (nodeagent.devices.inventory_from_file)")  # fmt: skip
    parser.add_argument("--vendor", choices=["nvidia", "amd"],
                        help="the GPUs' driver (default: the one loaded)")  # fmt: skip
    parser.add_argument("--simulated-root", type=Path,
                        help="manage a simulated node in this folder instead of this machine")  # fmt: skip
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    host = (
        FolderHost(args.simulated_root, prefix=args.prefix)
        if args.simulated_root
        else LinuxHost(
            confinement=confinement_for(args.cgroups),
            inventory=functools.cache(
                (lambda: inventory_from_file(args.devices))
                if args.devices
                else (lambda: discover(args.vendor))
            ),
            prefix=args.prefix,
        )
    )
    agent = Agent(
        url=args.url, credential=args.credential_file.read_text().strip(), host=host,
        state_dir=args.state_dir,
        stack=None if args.simulated_root else functools.cache(lambda: software.stack(args.vendor)),
    )  # fmt: skip
    if args.once:
        result = agent.run_once()
        return 0 if not result.errors else 1
    agent.run(interval=args.interval)
    return 0


def confinement_for(kind: str) -> Confinement:
    """The host's confinement: systemd's slices where systemd runs the host, else cgroupfs."""
    if kind == "auto":
        kind = "systemd" if Path("/run/systemd/system").is_dir() else cgroups.preferred()
    return SystemdSlices() if kind == "systemd" else cgroups.Cgroups(kind)


def _config(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nodeagent config",
        description="Print this node's configuration for confined sessions (docs/agent.md).",
    )
    parser.add_argument("part", choices=sorted(node_config.TEXTS))
    args = parser.parse_args(argv)
    sys.stdout.write(node_config.TEXTS[args.part](Layout()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
