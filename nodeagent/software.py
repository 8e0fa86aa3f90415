"""What the node runs: the GPU driver, the highest CUDA version it supports or the ROCm
release, the OS and kernel, and each GPU's compute capability or gfx target.

Read from the vendor's tools as an administrator would: `nvidia-smi
--query-gpu=index,name,driver_version,compute_cap --format=csv` and the header of
`nvidia-smi -q` ("CUDA Version", or "CUDA UMD Version" and "KMD Version" on newer drivers);
`amd-smi version` and `amd-smi static`; /etc/os-release and uname. The parsers take the
tools' text, so the console's tests feed them captured output. A tool that is missing or
fails leaves its fields empty: the console shows "unknown", never a guess.
"""

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

TIMEOUT = 20  # seconds a tool may take (nvidia-smi -q on a busy 8-GPU node takes a few)


class NvidiaGpu(TypedDict):
    index: int
    name: str
    compute_cap: str


class AmdGpu(TypedDict):
    index: int
    name: str
    gfx_target: str


def _header_value(text: str, *names: str) -> str:
    """The value of the first of `names` in `nvidia-smi -q`'s `Name : value` lines."""
    for name in names:
        match = re.search(rf"^\s*{re.escape(name)}\s*:\s*(\S.*?)\s*$", text, re.MULTILINE)
        if match and match.group(1) != "N/A":
            return match.group(1)
    return ""


def parse_nvidia_query(text: str) -> tuple[str, list[NvidiaGpu]]:
    """(driver, GPUs) from `nvidia-smi --query-gpu=…,driver_version,compute_cap --format=csv`
    (with its header line, so the columns are found by name: index and name are optional)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "", []
    header = [h.strip().split(" ")[0] for h in lines[0].split(",")]
    driver = ""
    gpus: list[NvidiaGpu] = []
    for position, line in enumerate(lines[1:]):
        cells = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
        driver = driver or cells.get("driver_version", "")
        index = cells.get("index", str(position))
        gpus.append(
            {
                "index": int(index) if index.isdigit() else position,
                "name": cells.get("name", ""),
                "compute_cap": cells.get("compute_cap", ""),
            }
        )
    return driver, gpus


def parse_nvidia_q(text: str) -> tuple[str, str]:
    """(driver, CUDA) from `nvidia-smi -q`'s header: "Driver Version"/"CUDA Version", or on
    newer drivers "KMD Version"/"CUDA UMD Version". CUDA here is the highest version the
    driver supports, not the toolkit of any image."""
    header = re.split(r"^Attached GPUs|^GPU ", text, maxsplit=1, flags=re.MULTILINE)[0]
    return (
        _header_value(header, "Driver Version", "KMD Version"),
        _header_value(header, "CUDA Version", "CUDA UMD Version"),
    )


def parse_amd_version(text: str) -> tuple[str, str]:
    """(ROCm, amdgpu) from `amd-smi version`: `… | ROCm version: 7.1.1 | amdgpu version:
    6.16.6 | …` (older tools name no amdgpu)."""
    fields = {}
    for part in re.split(r"\s*\|\s*|\n", text):
        name, _sep, value = part.partition(":")
        fields[name.strip().lower()] = value.strip()
    return fields.get("rocm version", ""), fields.get("amdgpu version", "")


def parse_amd_static(text: str) -> tuple[str, list[AmdGpu]]:
    """(amdgpu driver, GPUs) from `amd-smi static`: per `GPU: n` block its ASIC's
    MARKET_NAME and TARGET_GRAPHICS_VERSION, and the DRIVER's VERSION."""
    gpus: list[AmdGpu] = []
    driver = ""
    section = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _sep, value = line.strip().partition(":")
        name, value = name.strip(), value.strip()
        if re.fullmatch(r"GPU", name) and value.isdigit() and not line.startswith(" "):
            gpus.append({"index": int(value), "name": "", "gfx_target": ""})
            section = ""
            continue
        if not value:
            section = name
            continue
        if not gpus:
            continue
        if name == "MARKET_NAME" and section == "ASIC":
            gpus[-1]["name"] = value
        elif name == "TARGET_GRAPHICS_VERSION":
            gpus[-1]["gfx_target"] = value
        elif name == "VERSION" and section == "DRIVER":
            driver = driver or value
    return driver, gpus


def parse_os_release(text: str) -> str:
    fields = {}
    for line in text.splitlines():
        name, _sep, value = line.partition("=")
        fields[name.strip()] = value.strip().strip('"')
    return fields.get("PRETTY_NAME") or " ".join(
        filter(None, (fields.get("NAME"), fields.get("VERSION_ID")))
    )


def _run(*argv: str) -> str:
    if not shutil.which(argv[0]):
        return ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def stack(
    vendor: str | None = None,
    *,
    run: Callable[..., str] = _run,
    os_release: Path = Path("/etc/os-release"),
) -> dict[str, Any]:
    """The node's stack as the report carries it (`software`): empty strings where a tool
    could not say."""
    report: dict[str, Any] = {
        "vendor": "",
        "driver": "",
        "cuda": "",
        "rocm": "",
        "amdgpu": "",
        "gpus": [],
    }
    if vendor in (None, "nvidia"):
        driver, gpus = parse_nvidia_query(
            run("nvidia-smi", "--query-gpu=index,name,driver_version,compute_cap", "--format=csv")
        )
        header_driver, cuda = parse_nvidia_q(run("nvidia-smi", "-q"))
        if driver or header_driver:
            report.update(vendor="nvidia", driver=driver or header_driver, cuda=cuda, gpus=gpus)
    if not report["vendor"] and vendor in (None, "amd"):
        rocm, amdgpu = parse_amd_version(run("amd-smi", "version"))
        static_driver, amd_gpus = parse_amd_static(run("amd-smi", "static"))
        if rocm or amdgpu or amd_gpus:
            report.update(vendor="amd", rocm=rocm, amdgpu=amdgpu or static_driver, gpus=amd_gpus)
    try:
        report["os"] = parse_os_release(os_release.read_text())
    except OSError:
        report["os"] = ""
    report["kernel"] = os.uname().release
    return report
