"""A stand-in for the fleet's exporters: realistic dcgm-exporter and AMD exporter text.

It serves every node at /nodes/<hostname>/metrics on one loopback port, following the
allocations (running → load that varies, stopped or free → near idle), and injects faults
on request: POST /faults/<hostname>?mode=timeout|500|empty|garbage|html|truncated|reset|
gpu-gone|no-serials|gzip-bomb|trickle|counter-reset|xid|ras|ok (`gpu=` for gpu-gone, xid and
ras; `code=` for xid, 79 by default: the GPU fell off the bus).

Energy counters rise with the power drawn, as the drivers' do (an `EnergyMeter` per
simulator), and `counter-reset` restarts a node's counters from zero, as a reboot does.
With `story=True` (the demo) things happen now and then, as on a real fleet: a GPU logs an
XID, one runs hot and throttles for ten minutes, a node flaps. Tests leave it off.
"""

import asyncio
import contextlib
import functools
import math
import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qs, unquote, urlsplit

from django.db import connection
from django.utils import timezone

from catalog.models import Node, NodeState

GpuStates = Callable[[datetime], dict[int, str]]

FAULT_MODES = {
    "ok", "timeout", "500", "empty", "garbage", "html", "truncated", "gpu-gone", "reset",
    "no-serials", "gzip-bomb", "trickle", "counter-reset", "xid", "ras",
}  # fmt: skip
XID_CODES = {13: "Graphics Engine Exception", 31: "GPU memory page fault",
             43: "GPU stopped processing", 48: "Double Bit ECC Error",
             79: "GPU has fallen off the bus", 94: "Contained ECC error"}  # fmt: skip
# More of NVIDIA's catalog, for the `xid` fault (the story logs only the codes above).
XID_MESSAGES = {**XID_CODES, 95: "Uncontained ECC error", 119: "GSP RPC timeout",
                120: "GSP error"}  # fmt: skip


class EnergyMeter:
    """Per-GPU energy counters in mJ since "boot", rising with the power drawn between two
    reads. `used_j` keeps the true joules drawn (across resets), for tests to compare."""

    def __init__(self):
        self._at: dict[str, float] = {}
        self._mj: dict[str, float] = {}
        self.used_j: dict[str, float] = {}

    def read_mj(self, uuid: str, t: float, power_w: float) -> float:
        last = self._at.get(uuid)
        if last is None:  # days since boot already: a real-sized counter
            self._mj[uuid] = 3.6e10 + (zlib.crc32(uuid.encode()) % 1000) * 1e8
            self.used_j[uuid] = 0.0
        elif t > last:
            self._mj[uuid] += power_w * (t - last) * 1000
            self.used_j[uuid] += power_w * (t - last)
        self._at[uuid] = max(t, last or t)
        return self._mj[uuid]

    def reset(self, uuid: str) -> None:
        self._mj[uuid] = 0.0


def _chance(*key, one_in: int) -> bool:
    """A deterministic coin: the same key always lands the same way."""
    return zlib.crc32(repr(key).encode()) % one_in == 0


class Story:
    """Events on a simulated fleet, decided by time windows so every poll agrees: an XID
    now and then (the exporter's last-XID value is sticky, as dcgm-exporter's is), a GPU
    running hot for ten minutes, a node unreachable for a minute."""

    def __init__(self):
        self.xids: dict[str, int] = {}

    def xid(self, uuid: str, t: float) -> int:
        hour = int(t // 3600)
        if _chance("xid", uuid, hour, one_in=400):
            codes = sorted(XID_CODES)
            self.xids[uuid] = codes[zlib.crc32(f"{uuid}{hour}".encode()) % len(codes)]
        return self.xids.get(uuid, 0)

    @staticmethod
    def hot(uuid: str, t: float) -> bool:
        return _chance("hot", uuid, int(t // 600), one_in=150)

    @staticmethod
    def flapping(hostname: str, t: float) -> bool:
        return t % 900 < 60 and _chance("flap", hostname, int(t // 900), one_in=40)


BOMB_BYTES = 64 * 2**20  # what the gzip bomb expands to; it is ~64 kB on the wire


@functools.cache
def gzip_bomb() -> bytes:
    """The gzip-bomb fault's body, compressed once per process (half a second of CPU)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    chunk = b"#" * 2**20
    data = b"".join(packer.compress(chunk) for _ in range(BOMB_BYTES // len(chunk)))
    return data + packer.flush()


@dataclass
class SimGpu:
    index: int
    uuid: str
    state: str  # running | stopped | free


@dataclass
class SimNode:
    hostname: str
    exporter: str
    model_name: str
    memory_mib: int
    gpus: list[SimGpu] = field(default_factory=list)
    prefix: str = ""
    # The driver the node runs: dcgm-exporter names it in a DCGM_FI_DRIVER_VERSION label
    # (as a counters CSV that declares it does); none where the node's stack is unknown.
    driver: str = ""


def _load(gpu_state, index, t, uuid, memory_mib, *, hot=False):
    """Deterministic-but-lively load per GPU: a slow wave plus jitter when running; a hot
    GPU throttles (lower clocks, less power, high temperature)."""
    phase = (hash(uuid) % 1000) / 1000 * math.tau
    if gpu_state == "running":
        util = 70 + 25 * math.sin(t / 90 + phase) + random.uniform(-5, 5)
        util = max(3.0, min(100.0, util))
        mem = memory_mib * (0.55 + 0.3 * (0.5 + 0.5 * math.sin(t / 300 + phase)))
        power = 180 + util * 4.5
        temp = 45 + util * 0.3
    else:
        util, mem, power, temp = 0.0, 0.0, 60 + random.uniform(0, 8), 29 + random.uniform(0, 3)
    if hot:
        power, temp = power * 0.7, 89 + random.uniform(0, 4)
    return util, mem, power, temp


_METER = EnergyMeter()  # for callers that bring none (one process, one fleet)


def render_dcgm(
    node: SimNode,
    t: float,
    *,
    drop: set[int] | None = None,
    meter: EnergyMeter | None = None,
    story: Story | None = None,
    xids: dict[int, int] | None = None,
) -> str:
    drop = drop or set()
    meter = meter or _METER
    xids = xids or {}
    rows: dict[str, list[tuple[str, str]]] = {k: [] for k in ("GPU_TEMP", "POWER_USAGE", "TOTAL_ENERGY_CONSUMPTION", "GPU_UTIL",
                            "XID_ERRORS", "FB_FREE", "FB_USED", "FB_RESERVED")}  # fmt: skip
    for gpu in node.gpus:
        if gpu.index in drop:
            continue
        hot = bool(story and story.hot(gpu.uuid, t))
        util, mem, power, temp = _load(gpu.state, gpu.index, t, gpu.uuid, node.memory_mib, hot=hot)
        xid = xids.get(gpu.index) or (story.xid(gpu.uuid, t) if story else 0)
        labels = (
            f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="00000000:{0x18 + gpu.index * 0x11:02X}:00.0",'
            f'device="nvidia{gpu.index}",modelName="{node.model_name}",Hostname="{node.hostname}"'
        ) + (f',DCGM_FI_DRIVER_VERSION="{node.driver}"' if node.driver else "")
        reserved = 480
        used = int(mem)
        rows["GPU_TEMP"].append((labels, f"{int(temp)}"))
        rows["POWER_USAGE"].append((labels, f"{power:.6f}"))
        energy = meter.read_mj(gpu.uuid, t, power)
        rows["TOTAL_ENERGY_CONSUMPTION"].append((labels, f"{int(energy)}"))
        rows["GPU_UTIL"].append((labels, f"{int(util)}"))
        message = XID_MESSAGES.get(xid, "No Error")
        rows["XID_ERRORS"].append((labels + f',err_code="{xid}",err_msg="{message}"', f"{xid}"))
        rows["FB_FREE"].append((labels, f"{node.memory_mib - used - reserved}"))
        rows["FB_USED"].append((labels, f"{used}"))
        rows["FB_RESERVED"].append((labels, f"{reserved}"))
    helps = {
        "GPU_TEMP": ("gauge", "GPU temperature (in C)."),
        "POWER_USAGE": ("gauge", "Power draw (in W)."),
        "TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ)."),
        "GPU_UTIL": ("gauge", "GPU utilization (in %)."),
        "XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
        "FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
        "FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
        "FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB)."),
    }
    names = list(rows)
    random.shuffle(names)  # dcgm-exporter's family order comes from Go map iteration
    out = []
    for name in names:
        kind, text = helps[name]
        metric = f"DCGM_FI_DEV_{name}"
        out.append(f"# HELP {metric} {text}\n# TYPE {metric} {kind}\n")
        out.extend(f"{metric}{{{labels}}} {value}\n" for labels, value in rows[name])
    return "".join(out)


def render_amd(
    node: SimNode,
    t: float,
    *,
    drop: set[int] | None = None,
    serials: bool = True,
    meter: EnergyMeter | None = None,
    story: Story | None = None,
    ras: dict[int, int] | None = None,
) -> str:
    drop = drop or set()
    meter = meter or _METER
    ras = ras or {}
    fams = {
        "gpu_gfx_activity": "Graphics engine usage in Percentage (0-100)",
        "gpu_junction_temperature": "Current junction/hotspot temperature in Celsius",
        "gpu_power_usage": "GPU Power usage in Watts",
        "gpu_total_vram": "Total VRAM memory of the GPU (in MB)",
        "gpu_used_vram": "Used VRAM memory of the GPU (in MB)",
        "gpu_energy_consumed": "Accumulated energy consumed by the GPU in uJ",
        "gpu_ecc_uncorrect_total": "Total uncorrectable ECC errors",
    }
    values: dict[str, list[tuple[str, str]]] = {name: [] for name in fams}
    total_mb = node.memory_mib * 2**20 / 1e6
    for gpu in node.gpus:
        if gpu.index in drop:
            continue
        hot = bool(story and story.hot(gpu.uuid, t))
        util, mem, power, temp = _load(gpu.state, gpu.index, t, gpu.uuid, node.memory_mib, hot=hot)
        labels = (
            f'card_model="102-G30211-0C",container="",deployment_mode="baremetal",'
            f'gpu_compute_partition_type="spx",gpu_id="{gpu.index}",gpu_memory_partition_type="nps1",'
            f'gpu_partition_id="0",hostname="{node.hostname}",job_id="",job_partition="",job_user="",'
            f'namespace="",pod="",serial_number="{gpu.uuid if serials else ""}"'
        )
        values["gpu_gfx_activity"].append((labels, f"{util:g}"))
        values["gpu_junction_temperature"].append((labels, f"{temp:g}"))
        values["gpu_power_usage"].append((labels, f"{power:g}"))
        values["gpu_total_vram"].append((labels, f"{total_mb:.0f}"))
        values["gpu_used_vram"].append((labels, f"{mem * 2**20 / 1e6:.0f}"))
        energy_uj = meter.read_mj(gpu.uuid, t, power) * 1000
        values["gpu_energy_consumed"].append((labels, f"{energy_uj:.12g}"))
        values["gpu_ecc_uncorrect_total"].append((labels, f"{ras.get(gpu.index, 0)}"))
    out = []
    for name, text in fams.items():
        metric = node.prefix + name
        out.append(f"# HELP {metric} {text}\n# TYPE {metric} gauge\n")
        out.extend(f"{metric}{{{labels}}} {value}\n" for labels, value in values[name])
    out.append("# HELP promhttp_metric_handler_requests_total Total number of scrapes.\n"
               "# TYPE promhttp_metric_handler_requests_total counter\n"
               'promhttp_metric_handler_requests_total{code="200"} 42\n')  # fmt: skip
    return "".join(out)


class Simulator:
    """An asyncio HTTP server; `nodes` is refreshed by `loader` every `refresh` seconds."""

    def __init__(
        self, loader, *, host="127.0.0.1", port=0, refresh=5.0, hang_seconds=30.0, story=False
    ):
        self.loader = loader
        self.meter = EnergyMeter()
        self.story = Story() if story else None
        self.host, self.port = host, port
        self.refresh = refresh
        self.hang_seconds = hang_seconds
        self.nodes: dict[str, SimNode] = {}
        self.faults: dict[str, str] = {}
        self.gone: dict[str, set[int]] = {}
        # Every body served with 200 per hostname, where a test asks for them (`record()`).
        self.served: dict[str, list[str]] | None = None
        self.xids: dict[str, dict[int, int]] = {}  # hostname → {GPU index: XID code}
        self.ras: dict[str, dict[int, int]] = {}  # hostname → {GPU index: uncorrectable errors}
        self._loaded_at = 0.0
        self._server = None
        self._loop = None
        self._thread = None
        self.ready = threading.Event()

    def set_fault(self, hostname, mode, gpu=None, code=None):
        if mode not in FAULT_MODES:
            raise ValueError(f"unknown fault mode {mode!r}")
        if mode == "gpu-gone":
            self.gone.setdefault(hostname, set()).add(int(gpu or 0))
        elif mode == "xid":  # the exporter's last-XID gauge is sticky, as dcgm-exporter's is
            self.xids.setdefault(hostname, {})[int(gpu or 0)] = int(code or 79)
        elif mode == "ras":  # AMD: an uncorrectable ECC error more
            counts = self.ras.setdefault(hostname, {})
            counts[int(gpu or 0)] = counts.get(int(gpu or 0), 0) + 1
        elif mode == "counter-reset":
            node = self.nodes.get(hostname)
            for sim_gpu in node.gpus if node else []:
                self.meter.reset(sim_gpu.uuid)
        elif mode == "ok":
            self.faults.pop(hostname, None)
            self.gone.pop(hostname, None)
            self.xids.pop(hostname, None)
            self.ras.pop(hostname, None)
        else:
            self.faults[hostname] = mode

    async def _reload(self):
        if time.monotonic() - self._loaded_at >= self.refresh:
            self._loaded_at = time.monotonic()
            self.nodes = await asyncio.to_thread(self.loader)

    async def _handle(self, reader, writer):
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10)
            while await asyncio.wait_for(reader.readline(), 10) not in (
                b"\r\n",
                b"\n",
                b"",
            ):
                pass
            method, target, _ = request_line.decode("latin-1").split(" ", 2)
            url = urlsplit(target)
            parts = [unquote(p) for p in url.path.strip("/").split("/")]
            if method == "POST" and len(parts) == 2 and parts[0] == "faults":
                query = parse_qs(url.query)
                try:
                    self.set_fault(
                        parts[1], query.get("mode", ["ok"])[0], query.get("gpu", [None])[0],
                        query.get("code", [None])[0],
                    )  # fmt: skip
                    await self._send(writer, 200, "ok\n")
                except ValueError as exc:
                    await self._send(writer, 400, f"{exc}\n")
                return
            if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "metrics":
                await self._metrics(writer, parts[1])
                return
            await self._send(writer, 404, "not found\n")
        except (TimeoutError, ValueError, ConnectionError):
            pass
        finally:
            try:
                writer.close()
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def _metrics(self, writer, hostname):
        await self._reload()
        node = self.nodes.get(hostname)
        if node is None:
            await self._send(writer, 404, "unknown node\n")
            return
        fault = self.faults.get(hostname)
        if fault is None and self.story and self.story.flapping(hostname, time.time()):
            fault = "500"
        if fault == "timeout":
            await asyncio.sleep(self.hang_seconds)
            return
        if fault == "reset":
            writer.transport.abort()
            return
        if fault == "500":
            await self._send(writer, 500, "internal server error\n")
            return
        if fault == "empty":
            await self._send(writer, 200, "")
            return
        if fault == "html":
            await self._send(writer, 200, "<html><body>502 Bad Gateway</body></html>\n")
            return
        if fault == "gzip-bomb":
            await self._send_gzip_bomb(writer)
            return
        if node.exporter == "amd":
            body = render_amd(
                node, time.time(), drop=self.gone.get(hostname), serials=fault != "no-serials",
                meter=self.meter, story=self.story, ras=self.ras.get(hostname),
            )  # fmt: skip
        else:
            body = render_dcgm(
                node, time.time(), drop=self.gone.get(hostname), meter=self.meter,
                story=self.story, xids=self.xids.get(hostname),
            )  # fmt: skip
        if fault == "garbage":
            body = "DCGM_FI_DEV_GPU_UTIL{gpu=0} abc\n" + body
        if fault == "truncated":
            body = body[: len(body) // 2].rsplit('"', 1)[0]
        if fault == "trickle":  # a byte now and then: each read is quick, the answer never is
            await self._send(writer, 200, body, per_byte_delay=0.2)
            return
        if self.served is not None:
            self.served.setdefault(hostname, []).append(body)
        await self._send(writer, 200, body)

    def record(self) -> dict[str, list[str]]:
        """From now on keep every exporter body served (a test reads what a scraper got)."""
        self.served = {}
        return self.served

    @staticmethod
    async def _send(writer, status, body, *, per_byte_delay=0.0, encoding=None):
        data = body if isinstance(body, bytes) else body.encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}
        head = (
            f"HTTP/1.1 {status} {reason.get(status, 'OK')}\r\nContent-Type: text/plain; "
            f"version=0.0.4; charset=utf-8\r\nContent-Length: {len(data)}\r\n"
            + (f"Content-Encoding: {encoding}\r\n" if encoding else "")
            + "Connection: close\r\n\r\n"
        )
        writer.write(head.encode())
        if not per_byte_delay:
            writer.write(data)
        else:
            for offset in range(len(data)):
                writer.write(data[offset : offset + 1])
                await writer.drain()
                await asyncio.sleep(per_byte_delay)
        await writer.drain()

    async def _send_gzip_bomb(self, writer):
        await self._send(writer, 200, await asyncio.to_thread(gzip_bomb), encoding="gzip")

    async def serve(self):
        self._loop = asyncio.get_running_loop()
        self.nodes = await asyncio.to_thread(self.loader)
        self._loaded_at = time.monotonic()
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        self.ready.set()
        async with self._server:
            await self._server.serve_forever()

    def start_in_thread(self):
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._run_quietly()), daemon=True
        )
        self._thread.start()
        if not self.ready.wait(30):
            raise RuntimeError("simulator did not start")
        return self

    async def _run_quietly(self):
        with contextlib.suppress(asyncio.CancelledError):
            await self.serve()

    def stop(self):
        if self._loop and self._server:
            self._loop.call_soon_threadsafe(self._server.close)

    def url_for(self, hostname):
        return f"http://{self.host}:{self.port}/nodes/{hostname}/metrics"


def fleet_from_database(*, gpu_states: GpuStates | None = None) -> dict[str, SimNode]:
    """The fleet as the simulator sees it: nodes, GPUs and each GPU's state now.

    `gpu_states(now)` maps GPU ids to "running" or "stopped"; the layer that knows the
    allocations passes it in (rentals.selectors.holdings.gpu_states_at). Without it every GPU is free.
    """
    try:
        states = gpu_states(timezone.now()) if gpu_states else {}
        nodes = {}
        for node in (
            Node.objects.exclude(state=NodeState.RETIRED)
            .select_related("gpu_model")
            .prefetch_related("gpus")
        ):
            nodes[node.hostname] = SimNode(
                hostname=node.hostname,
                exporter=node.exporter,
                model_name=node.gpu_model.name,
                memory_mib=node.gpu_model.memory_reported_mib,
                prefix=node.metric_prefix,
                driver=node.driver_version if node.exporter == "dcgm" else "",
                gpus=[SimGpu(g.index, g.uuid, states.get(g.pk, "free")) for g in node.gpus.all()],
            )
        return nodes
    finally:
        connection.close()  # this runs in a helper thread; leave no idle session behind
