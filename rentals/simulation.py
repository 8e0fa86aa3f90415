"""The demo's simulated nodes, each a whole node as a provider runs one: exporter text
(telemetry.simulator), an SSH server (telemetry.simulated_ssh) and the reference agent
(nodeagent) making a folder that stands in for the machine match what AnchorGPU asks.

The simulated GPUs' load follows what the agent applied, not the database: a tenant the
agent let in keeps its GPUs busy, so a node that failed to revoke shows up as a stopped
allocation's GPUs at work (the activity flag).
"""

import asyncio
import os
import threading
from pathlib import Path

from django.conf import settings
from django.db import connection

from catalog.models import ExporterKind, Node, NodeState
from nodeagent.agent import Agent
from nodeagent.hosts import FolderHost
from rentals.selectors.holdings import gpu_states_at
from telemetry.agents import agent_credential_issue
from telemetry.simulated_ssh import SimulatedGpu, SimulatedShellNode, SimulatedSshServer
from telemetry.simulator import fleet_from_database


def simulated_fleet():
    """The exporter simulator's fleet as the database has it (tests, no agents)."""
    return fleet_from_database(gpu_states=gpu_states_at)


class SimulatedNodes:
    """Every active node of the fleet as a simulated machine under `root/<hostname>`."""

    def __init__(self, root: Path, *, console_url: str, interval: float = 10.0,
                 first_port: int = 2201):  # fmt: skip
        self.root = Path(root)
        self.console_url = console_url
        self.interval = interval
        self.first_port = first_port
        self.hosts: dict[str, FolderHost] = {}
        self.servers: dict[str, SimulatedSshServer] = {}
        self.agents: dict[str, Agent] = {}

    def prepare(self) -> None:
        """A folder, a credential and an SSH server for each node (not yet listening)."""
        nodes = Node.objects.filter(state=NodeState.ACTIVE).select_related("gpu_model")
        for node in nodes.prefetch_related("gpus").order_by("hostname"):
            host = FolderHost(self.root / node.hostname)
            shell = SimulatedShellNode(
                hostname=node.hostname,
                model_name=node.gpu_model.name,
                vendor="amd" if node.exporter == ExporterKind.AMD else "nvidia",
                gpus=[SimulatedGpu(g.index, g.uuid) for g in node.gpus.all()],
            )
            self.hosts[node.hostname] = host
            self.servers[node.hostname] = SimulatedSshServer(shell, host)
            self.agents[node.hostname] = Agent(
                url=self.console_url,
                credential=agent_credential_issue(node=node),
                host=host,
                state_dir=self.root / node.hostname / "agent",
            )
        connection.close()

    async def serve_ssh(self) -> None:
        """Each node's SSH server on loopback (its own port, kept in the node's row so the
        allocation pages show the right ssh command)."""
        for offset, (hostname, server) in enumerate(sorted(self.servers.items())):
            server.port = self.first_port + offset
            try:
                port = await server.start()
            except OSError:  # taken: any free port will do
                server.port = 0
                port = await server.start()
            await _record_port(hostname, port)

    def run_agents(self, stop: threading.Event) -> threading.Thread:
        """One thread runs every node's agent in turn, as often as `interval`."""

        def loop():
            while not stop.is_set():
                for agent in self.agents.values():
                    try:
                        agent.run_once()
                    except Exception:  # one node's trouble is its own
                        continue
                stop.wait(self.interval)

        thread = threading.Thread(target=loop, name="agents", daemon=True)
        thread.start()
        return thread

    def loader(self):
        """The exporter simulator's fleet: the database's nodes, each GPU busy exactly
        when the node's agent let a tenant use it."""
        nodes = fleet_from_database()
        for hostname, node in nodes.items():
            host = self.hosts.get(hostname)
            granted = {i for gpus in (host.granted() if host else {}).values() for i in gpus}
            for gpu in node.gpus:
                gpu.state = "running" if gpu.index in granted else "free"
        return nodes


async def _record_port(hostname: str, port: int) -> None:
    def save():
        try:
            Node.objects.filter(hostname=hostname).update(ssh_host="127.0.0.1", ssh_port=port)
        finally:
            connection.close()

    await asyncio.to_thread(save)


def nodes_root() -> Path:
    """Where `make run` keeps the simulated machines (beside its embedded servers' data)."""
    return Path(os.environ.get("ANCHORGPU_DATA_DIR", settings.BASE_DIR / ".data")) / "nodes"
