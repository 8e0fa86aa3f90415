import argparse
import asyncio
import contextlib
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from rentals.simulation import SimulatedNodes, nodes_root, simulated_fleet
from telemetry.simulator import Simulator


class Command(BaseCommand):
    help = "Serve simulated dcgm-exporter / AMD exporter text for the fleet's nodes on loopback."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=9400)
        parser.add_argument(
            "--fault",
            action="append",
            default=[],
            metavar="HOST=MODE",
            help="start with a fault (timeout, 500, empty, garbage, html, truncated, reset, "
            "gpu-gone[:INDEX], counter-reset)",
        )
        parser.add_argument(
            "--refresh",
            type=float,
            default=5.0,
            help="seconds between reloads of the fleet and the allocations from the database",
        )
        parser.add_argument(
            "--console",
            help="AnchorGPU's address: each node also gets an SSH server on loopback and the "
            "reference agent (nodeagent), which pulls the node's state from here",
        )
        parser.add_argument("--agent-interval", type=float, default=10.0)
        parser.add_argument(
            "--story",
            action=argparse.BooleanOptionalAction,
            default=settings.ANCHORGPU["SIMULATOR_STORY"],
            help="now and then an XID, a hot GPU or a flapping node (SIMULATOR_STORY)",
        )

    def handle(self, *args, host, port, fault, story, refresh, console, agent_interval, **options):
        machines = None
        loader = simulated_fleet
        if console:
            machines = SimulatedNodes(nodes_root(), console_url=console, interval=agent_interval)
            machines.prepare()
            loader = machines.loader
        simulator = Simulator(loader, host=host, port=port, story=story, refresh=refresh)
        for item in fault:
            hostname, _, mode = item.partition("=")
            mode, _, gpu = mode.partition(":")
            simulator.set_fault(hostname, mode, gpu or None)
        self.stdout.write(f"simulating exporters on http://{host}:{port}/nodes/<hostname>/metrics")
        stop = threading.Event()
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(self._serve(simulator, machines, stop))
        stop.set()

    async def _serve(self, simulator, machines, stop):
        if machines:
            await machines.serve_ssh()
            machines.run_agents(stop)
            self.stdout.write(
                f"simulating {len(machines.servers)} nodes' SSH servers and agents "
                f"(agents pull from {machines.console_url})"
            )
        await simulator.serve()
