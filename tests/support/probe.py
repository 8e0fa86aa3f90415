"""What a tenant's session can reach, run by the tenant on the node (python3 probe.py …) in
the isolation tests; it prints one JSON object. Standard library only.

  open PATH…        each path opened read-write: "opened" or the errno's name (ENXIO: the
                    kernel let the process reach the device, which has no driver; EPERM:
                    the device filter refused it)
  child KIND PATH…  make a child group in its own group holding the device filter (KIND
                    v2: the unified one; v1: the devices controller's), move itself there,
                    then open each path
  escape            try to leave or widen its groups: its pid written to the hierarchies'
                    roots and to its groups' parents, a devices.allow rule, a device program
                    of its own
  look FOLDER…      what it sees: each folder's entries (or the errno), and the owners of
                    the processes /proc shows
  read FILE…        each file's text (or the errno)
  mqueue NAME       make a POSIX message queue (mode 0660) holding one message
"""

import contextlib
import errno
import json
import os
import sys
from pathlib import Path


def _error(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno, str(exc.errno))


def opened(paths) -> dict:
    out = {}
    for path in paths:
        try:
            os.close(os.open(path, os.O_RDWR))
            out[path] = "opened"
        except OSError as exc:
            out[path] = _error(exc)
    return out


def _groups() -> dict[str, Path]:
    """{hierarchy ("" for v2, else a v1 controller): its folder for this process}."""
    mounts = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fstype, _source, options = after.split(" ")[:3]
        point = before.split(" ")[4]
        if fstype == "cgroup2":
            mounts.setdefault("", Path(point))
        elif fstype == "cgroup":
            for option in options.split(","):
                mounts.setdefault(option, Path(point))
    groups = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            if controller in mounts:
                groups[controller] = mounts[controller] / path.lstrip("/")
    return {k: v for k, v in groups.items() if k in ("", "devices")}, mounts


def child(args) -> dict:
    kind, paths = args[0], args[1:]
    groups, _ = _groups()
    made = groups["devices" if kind == "v1" else ""] / "probe-child"
    try:
        made.mkdir()
        (made / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as exc:
        return {"child": _error(exc)}
    return {"child": "made", **opened(paths)}


def escape() -> dict:
    groups, mounts = _groups()
    out = {}
    for name, group in groups.items():
        for target in (mounts[name], group.parent, group.parent.parent):
            try:
                (target / "cgroup.procs").write_text(str(os.getpid()))
                out[f"move {target}"] = "moved"
            except OSError as exc:
                out[f"move {target}"] = _error(exc)
        if name == "devices":
            try:
                (group / "devices.allow").write_text("a")
                out["devices.allow"] = "widened"
            except OSError as exc:
                out["devices.allow"] = _error(exc)
    sys.path.insert(0, str(Path(__file__).resolve().parent / "agent"))
    from nodeagent import bpf
    from nodeagent.devices import Rule

    try:
        bpf.attach(str(groups[""]), [Rule("c", 195, None)])
        out["bpf"] = "attached"
    except (OSError, KeyError) as exc:
        out["bpf"] = _error(exc) if isinstance(exc, OSError) else "no v2 group"
    return out


def look(folders) -> dict:
    out = {}
    for folder in folders:
        try:
            out[folder] = sorted(os.listdir(folder))
        except OSError as exc:
            out[folder] = _error(exc)
    owners = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                owners.add(entry.stat().st_uid)
    out["process owners"] = sorted(owners)
    return out


def read(files) -> dict:
    out = {}
    for path in files:
        try:
            out[path] = Path(path).read_text()
        except OSError as exc:
            out[path] = _error(exc)
    return out


def mqueue(args) -> dict:
    import ctypes

    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    queue = rt.mq_open(args[0].encode(), os.O_CREAT | os.O_RDWR, 0o660, None)
    if queue < 0:
        return {"mqueue": errno.errorcode[ctypes.get_errno()]}
    message = b"secret of " + os.environ.get("USER", "").encode()
    rt.mq_send(queue, message, len(message), 0)
    return {"mqueue": "made"}


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    answer = {"open": opened, "child": child, "look": look, "read": read,
              "mqueue": mqueue}.get(command)  # fmt: skip
    print(json.dumps(answer(args) if answer else escape()))
