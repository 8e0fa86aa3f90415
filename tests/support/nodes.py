"""A simulated node for tests that sign in over SSH: its folder, its SSH server on a loop
thread, and the reference agent applying the console's desired state."""

import asyncio
import threading
from pathlib import Path

from catalog.models import Node
from nodeagent.agent import Agent
from nodeagent.hosts import FolderHost
from telemetry.agents import agent_credential_issue
from telemetry.simulated_ssh import SimulatedGpu, SimulatedShellNode, SimulatedSshServer


class SimulatedNode:
    """One node: its folder, its SSH server on a loop thread, and its agent."""

    def __init__(self, node: Node, root: Path, console_url: str):
        self.node = node
        self.host = FolderHost(root / "node")
        shell = SimulatedShellNode(
            hostname=node.hostname, model_name=node.gpu_model.name, vendor="nvidia",
            gpus=[SimulatedGpu(g.index, g.uuid) for g in node.gpus.order_by("index")],
        )  # fmt: skip
        self.server = SimulatedSshServer(shell, self.host)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        Node.objects.filter(pk=node.pk).update(ssh_host="127.0.0.1", ssh_port=self.port)
        self.agent = Agent(url=console_url, credential=agent_credential_issue(node=node),
                           host=self.host, state_dir=root / "agent")  # fmt: skip

    def round(self):
        result = self.agent.run_once()
        assert result.fetched and result.errors == [], result
        return result

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
