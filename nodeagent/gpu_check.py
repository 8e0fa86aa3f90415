"""A real GPU, confined, checked by hand on a node with one NVIDIA GPU and no network (no
console needed; docs/agent.md). As root, from the folder that holds `nodeagent/`:

    python3 -m nodeagent.gpu_check

It makes two tenants with the agent's own code: A holds the node's GPU, B holds none. As
each, inside its groups, it runs `nvidia-smi -L` and a CUDA probe (the driver API through
ctypes: cuInit, cuDeviceGetCount, a context on device 0). A must list its GPU's UUID and its
probe must run; B must list nothing and its probe must fail. It prints what each saw, exits
0 when both hold, 1 when one does not, and removes everything it made either way.
"""

import json
import os
import pwd
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from nodeagent import cgroups
from nodeagent.devices import discover
from nodeagent.hosts import Grant, Layout, LinuxHost

PROBE = r"""
import ctypes, json
out = {}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    out["cuInit"] = cuda.cuInit(0)
    count = ctypes.c_int(0)
    out["cuDeviceGetCount"] = cuda.cuDeviceGetCount(ctypes.byref(count))
    out["devices"] = count.value
    device, context = ctypes.c_int(0), ctypes.c_void_p()
    if count.value:
        cuda.cuDeviceGet(ctypes.byref(device), 0)
        out["cuCtxCreate"] = cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device)
except OSError as exc:
    out["error"] = str(exc)
out["runs"] = out.get("cuCtxCreate") == 0
print(json.dumps(out))
"""


def _as_tenant(host: LinuxHost, login: str, argv: list[str]) -> tuple[int, str]:
    """Run `argv` as the tenant, inside its groups (as the PAM hook puts a session there)."""
    entry = pwd.getpwnam(login)
    procs = host.confinement.procs_files(login)

    def enter() -> None:
        for path in procs:
            Path(path).write_text(str(os.getpid()))
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)

    try:
        done = subprocess.run(argv, preexec_fn=enter, capture_output=True, text=True,
                              timeout=120, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir})  # fmt: skip
    except OSError as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def main() -> int:
    if os.geteuid() != 0:
        print("run as root: it makes two accounts and their control groups")
        return 2
    if shutil.which("nvidia-modprobe"):  # /dev/nvidia-uvm exists once UVM is loaded
        subprocess.run(["nvidia-modprobe", "-u", "-c", "0"], capture_output=True)
    inventory = discover("nvidia")
    if len(inventory.gpus) != 1:
        print(
            f"this check wants a node with one NVIDIA GPU; the driver lists {len(inventory.gpus)}"
        )
        return 2
    (gpu,) = inventory.gpus
    tag = uuid.uuid4().hex[:8]
    root = Path("/run") / f"anchorgpu-check-{tag}"
    layout = Layout(keys=root / "keys", env=root / "env", sessions=root / "sessions",
                    records=root / "records", private=root / "private",
                    tenant_group=f"agpu-check-{tag}", uid_base=2_100_000_000)  # fmt: skip
    confinement = cgroups.Cgroups(cgroups.preferred(), parent=f"anchorgpu-check-{tag}")
    host = LinuxHost(
        confinement=confinement,
        inventory=lambda: inventory, layout=layout, gpu_reset=False,
    )  # fmt: skip
    tenants = {"A": (f"agpu-c{tag}a", [(0, gpu)]), "B": (f"agpu-c{tag}b", [])}
    seen = {}
    try:
        for name, (login, gpus) in tenants.items():
            host.create(login, f"check-{tag}-{name}")
            host.grant(login, Grant(keys=[], gpus=gpus, variable="CUDA_VISIBLE_DEVICES",
                                    cpus=None, memory_mib=None))  # fmt: skip
            listed = _as_tenant(host, login, ["nvidia-smi", "-L"])
            status, probe = _as_tenant(host, login, ["python3", "-c", PROBE])
            try:
                probed = json.loads(probe.splitlines()[-1])
            except (ValueError, IndexError):
                probed = {"error": probe, "runs": False}
            seen[name] = {"login": login, "nvidia-smi -L": listed, "cuda": probed}
    finally:
        for login, _gpus in tenants.values():
            try:
                host.wipe(login)
            except Exception as exc:  # noqa: BLE001 - report and go on removing
                print(f"removing {login}: {exc}")
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["groupdel", layout.tenant_group], capture_output=True)
        for parent in confinement._parents.values():
            if parent.is_dir():
                parent.rmdir()
    print(json.dumps(seen, indent=2))
    a_ok = gpu in seen["A"]["nvidia-smi -L"][1] and seen["A"]["cuda"]["runs"]
    b_ok = "UUID" not in seen["B"]["nvidia-smi -L"][1] and not seen["B"]["cuda"]["runs"]
    print(f"A (holds {gpu}): {'as sold' if a_ok else 'WRONG'}; B (holds none): "
          f"{'sees nothing' if b_ok else 'WRONG: reaches the GPU'}")  # fmt: skip
    return 0 if a_ok and b_ok else 1


if __name__ == "__main__":
    sys.exit(main())
