"""Which device nodes an allocation may open: its GPUs' (found by UUID, never by index),
the driver's shared ones, and what a shell needs. Nothing else.

A GPU's device node is found from the driver, by UUID: NVIDIA's through NVML's minor number
(libnvidia-ml through ctypes), or /proc/driver/nvidia when NVML is not there; AMD's render
node through the KFD topology in sysfs. An inventory file (`--devices`) names them instead,
on a node whose driver cannot be asked (the tests' fake device nodes).
"""

import ctypes
import json
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class DeviceError(Exception):
    """A GPU of the state that this node's driver does not know."""


@dataclass(frozen=True)
class Rule:
    """A device (or every minor of a major: `minor` None) and the access allowed."""

    kind: str  # "c" (character) or "b" (block)
    major: int
    minor: int | None
    path: str = ""  # the device node, where there is one (systemd's DeviceAllow= names it)
    access: str = "rw"

    @property
    def v1(self) -> str:
        """As cgroup v1's devices.allow takes it: `c 195:0 rw`."""
        minor = "*" if self.minor is None else self.minor
        return f"{self.kind} {self.major}:{minor} {self.access}"


# What a shell needs (systemd's DevicePolicy=closed set, with the terminals): null, zero,
# full, random, urandom, tty, ptmx and the pseudo-terminals (UNIX98 slaves, majors 136-143).
SHELL_DEVICES = (
    Rule("c", 1, 3, "/dev/null"),
    Rule("c", 1, 5, "/dev/zero"),
    Rule("c", 1, 7, "/dev/full"),
    Rule("c", 1, 8, "/dev/random"),
    Rule("c", 1, 9, "/dev/urandom"),
    Rule("c", 5, 0, "/dev/tty"),
    Rule("c", 5, 2, "/dev/ptmx"),
    *(Rule("c", major, None, "char-pts") for major in range(136, 144)),
)

NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
DRM_MAJOR = 226


@dataclass(frozen=True)
class Inventory:
    """A node's GPUs by UUID (each with its own device nodes) and the nodes every GPU user
    needs (NVIDIA's control and UVM nodes, AMD's /dev/kfd)."""

    vendor: str
    gpus: dict[str, tuple[Rule, ...]]  # {uuid: its device nodes}
    shared: tuple[Rule, ...]

    def rules_for(self, uuids: Collection[str]) -> tuple[Rule, ...]:
        """What an allocation of these GPUs may open: theirs, the shared ones, the shell's."""
        unknown = sorted(set(uuids) - set(self.gpus))
        if unknown:
            raise DeviceError(f"GPUs this node's driver does not list: {', '.join(unknown)}")
        own = tuple(rule for uuid in uuids for rule in self.gpus[uuid])
        return (*own, *(self.shared if uuids else ()), *SHELL_DEVICES)


def inventory_from_file(path: Path) -> Inventory:
    """{"vendor": "nvidia", "gpus": {uuid: [["c", 195, 0, "/dev/nvidia0"], …]},
    "shared": [["c", 195, 255, "/dev/nvidiactl"], …]}"""
    data = json.loads(Path(path).read_text())

    def rules(rows: Iterable[list[Any]]) -> tuple[Rule, ...]:
        return tuple(Rule(kind, int(major), None if minor is None else int(minor), node)
                     for kind, major, minor, node in rows)  # fmt: skip

    return Inventory(
        vendor=data["vendor"],
        gpus={uuid: rules(rows) for uuid, rows in data["gpus"].items()},
        shared=rules(data["shared"]),
    )


def _majors(proc_devices: Path = Path("/proc/devices")) -> dict[str, int]:
    """{driver name: major} of the character devices (the section before "Block devices")."""
    majors = {}
    for line in proc_devices.read_text().splitlines():
        if line.startswith("Block"):
            break
        number, _, name = line.strip().partition(" ")
        if number.isdigit():
            majors[name] = int(number)
    return majors


def _nvml_minors() -> dict[str, int] | None:
    """{uuid: minor} from NVML, or None where libnvidia-ml is not installed."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        minors = {}
        for index in range(count.value):
            handle = ctypes.c_void_p()
            uuid = ctypes.create_string_buffer(96)
            minor = ctypes.c_uint()
            if (
                nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0
                and nvml.nvmlDeviceGetUUID(handle, uuid, 96) == 0
                and nvml.nvmlDeviceGetMinorNumber(handle, ctypes.byref(minor)) == 0
            ):
                minors[uuid.value.decode()] = minor.value
        return minors
    finally:
        nvml.nvmlShutdown()


def _procfs_minors(root: Path = Path("/proc/driver/nvidia/gpus")) -> dict[str, int]:
    """{uuid: minor} from the driver's own /proc/driver/nvidia/gpus/*/information."""
    minors = {}
    for information in sorted(root.glob("*/information")):
        text = information.read_text()
        uuid = re.search(r"^GPU UUID:\s*(\S+)", text, re.M)
        minor = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
        if uuid and minor:
            minors[uuid.group(1)] = int(minor.group(1))
    return minors


def nvidia_inventory() -> Inventory:
    minors = _nvml_minors()
    if minors is None:
        minors = _procfs_minors()
    majors = _majors()
    mig = _mig_capabilities(majors.get("nvidia-caps"))
    gpus = {
        uuid: (Rule("c", NVIDIA_MAJOR, minor, f"/dev/nvidia{minor}"), *mig.get(minor, ()))
        for uuid, minor in minors.items()
    }
    shared = [Rule("c", NVIDIA_MAJOR, NVIDIACTL_MINOR, "/dev/nvidiactl")]
    if "nvidia-uvm" in majors:
        uvm = majors["nvidia-uvm"]
        shared += [Rule("c", uvm, 0, "/dev/nvidia-uvm"), Rule("c", uvm, 1, "/dev/nvidia-uvm-tools")]
    return Inventory("nvidia", gpus, tuple(shared))


def _mig_capabilities(
    major: int | None, path: Path = Path("/proc/driver/nvidia-caps/mig-minors")
) -> dict[int, tuple[Rule, ...]]:
    """{GPU minor: (Rule, …)}: with MIG, the access capabilities of each GPU's instances
    (`gpu0/gi1/access 12` is /dev/nvidia-caps/nvidia-cap12). The node-wide `config` and
    `monitor` capabilities are never given to a tenant."""
    caps: dict[int, tuple[Rule, ...]] = {}
    if major is None or not path.exists():
        return caps
    for line in path.read_text().splitlines():
        found = re.fullmatch(r"gpu(\d+)/\S+\s+(\d+)", line.strip())
        if found:
            gpu, minor = int(found.group(1)), int(found.group(2))
            rule = Rule("c", major, minor, f"/dev/nvidia-caps/nvidia-cap{minor}")
            caps[gpu] = (*caps.get(gpu, ()), rule)
    return caps


def amd_inventory(topology: Path = Path("/sys/class/kfd/kfd/topology/nodes")) -> Inventory:
    """Each GPU's render node from the KFD topology (`drm_render_minor`), known by its
    `unique_id` (as `GPU-<hex>`, the form ROCm's tools print) and its board serial."""
    gpus: dict[str, tuple[Rule, ...]] = {}
    for properties in sorted(topology.glob("*/properties")):
        fields = dict(
            line.split(" ", 1) for line in properties.read_text().splitlines() if " " in line
        )
        minor = int(fields.get("drm_render_minor", "0"))
        if not minor:  # a CPU node of the topology
            continue
        node = (Rule("c", DRM_MAJOR, minor, f"/dev/dri/renderD{minor}"),)
        if int(fields.get("unique_id", "0")):
            gpus[f"GPU-{int(fields['unique_id']):016x}"] = node
        serial = _render_serial(minor)
        if serial:
            gpus[serial] = node
    kfd = _majors().get("kfd")
    shared = (Rule("c", kfd, 0, "/dev/kfd"),) if kfd is not None else ()
    return Inventory("amd", gpus, shared)


def _render_serial(minor: int) -> str:
    try:
        return Path(f"/sys/class/drm/renderD{minor}/device/serial_number").read_text().strip()
    except OSError:
        return ""


def discover(vendor: str | None = None) -> Inventory:
    """This node's GPUs, from the driver that is loaded (or the vendor named)."""
    if vendor is None:
        vendor = (
            "amd"
            if Path("/dev/kfd").exists() and not Path("/proc/driver/nvidia").exists()
            else "nvidia"
        )
    return amd_inventory() if vendor == "amd" else nvidia_inventory()
