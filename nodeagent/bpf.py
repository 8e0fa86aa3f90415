"""The cgroup v2 device filter: a BPF_PROG_TYPE_CGROUP_DEVICE program, built and attached
through the bpf(2) system call with ctypes (no libbpf, no compiler on the node).

cgroup v2 has no `devices.allow` file: the kernel asks the programs attached to a group (and
to its ancestors) whether a process in it may open or mknod a device, by type, major and
minor. This is what systemd writes for `DevicePolicy=closed` and runc for a container. The
program here allows exactly the rules it is built from and refuses everything else with
EPERM. It is attached without BPF_F_ALLOW_OVERRIDE or BPF_F_ALLOW_MULTI, so no descendant
group may attach one of its own, and attaching again replaces it atomically.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodeagent.devices import Rule

# include/uapi/linux/bpf.h
_BPF_PROG_LOAD, _BPF_PROG_ATTACH, _BPF_PROG_QUERY = 5, 8, 16
_BPF_PROG_TYPE_CGROUP_DEVICE = 15
_BPF_CGROUP_DEVICE = 6
_DEV_BLOCK, _DEV_CHAR = 1, 2  # BPF_DEVCG_DEV_*
_ACC_MKNOD, _ACC_READ, _ACC_WRITE = 1, 2, 4  # BPF_DEVCG_ACC_*
_SYSCALL = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351}

# The few eBPF opcodes the program needs.
_LDXW = 0x61  # dst = *(u32 *)(src + off)
_AND64_K, _RSH64_K, _MOV64_K, _MOV64_X = 0x57, 0x77, 0xB7, 0xBF
_JNE_K = 0x55  # if dst != imm goto pc + off
_EXIT = 0x95


def _insn(op: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", op, (src << 4) | dst, off, imm)


def access_mask(access: str) -> int:
    return (
        (_ACC_MKNOD if "m" in access else 0)
        | (_ACC_READ if "r" in access else 0)
        | (_ACC_WRITE if "w" in access else 0)
    )


def program(rules: Iterable[Rule]) -> bytes:
    """The instructions for `rules` (each with `kind` "c"/"b", `major`, `minor` or None for
    any, `access` of "rwm"). The context is struct bpf_cgroup_dev_ctx {u32 access_type
    (access << 16 | type); u32 major; u32 minor}; the answer is 1 (allow) or 0 (EPERM)."""
    code = [
        _insn(_LDXW, 2, 1, 0), _insn(_AND64_K, 2, imm=0xFFFF),  # r2: the device's type
        _insn(_LDXW, 3, 1, 0), _insn(_RSH64_K, 3, imm=16),  # r3: the access asked for
        _insn(_LDXW, 4, 1, 4), _insn(_LDXW, 5, 1, 8),  # r4: major, r5: minor
    ]  # fmt: skip
    for rule in rules:
        checks = [(2, _DEV_CHAR if rule.kind == "c" else _DEV_BLOCK), (4, rule.major)]
        if rule.minor is not None:
            checks.append((5, rule.minor))
        # Each check jumps past the rest of this rule's block when it fails; the block ends
        # "asked ⊆ allowed → return 1".
        tail = [
            _insn(_MOV64_X, 1, 3),
            _insn(_AND64_K, 1, imm=~access_mask(rule.access) & 0xFFFF),
            _insn(_JNE_K, 1, off=2),
            _insn(_MOV64_K, 0, imm=1),
            _insn(_EXIT),
        ]
        size = len(checks) + len(tail)
        code += [
            _insn(_JNE_K, reg, off=size - i - 1, imm=value) for i, (reg, value) in enumerate(checks)
        ]
        code += tail
    code += [_insn(_MOV64_K, 0, imm=0), _insn(_EXIT)]
    return b"".join(code)


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


def _bpf(command: int, attr: bytes) -> tuple[int, bytes]:
    """bpf(2) with `attr` as its union bpf_attr: the result, and the union as the kernel
    left it."""
    try:
        number = _SYSCALL[platform.machine()]
    except KeyError:
        raise OSError(f"no bpf(2) number known for {platform.machine()}") from None
    buffer = ctypes.create_string_buffer(attr, 128)
    result = _LIBC.syscall(number, command, buffer, len(buffer))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"bpf(2): {os.strerror(error)}")
    return result, buffer.raw


def attach(group: str, rules: Iterable[Rule]) -> None:
    """Load the program for `rules` and attach it to the cgroup v2 folder `group`,
    replacing the one attached there before. The group keeps it after the descriptor
    closes, until the group is removed."""
    code = program(rules)
    instructions = ctypes.create_string_buffer(code, len(code))
    licence = ctypes.create_string_buffer(b"GPL")

    def load(log: ctypes.Array[ctypes.c_char] | None) -> int:
        attr = struct.pack(
            "<IIQQIIQII16sII",
            _BPF_PROG_TYPE_CGROUP_DEVICE, len(code) // 8, ctypes.addressof(instructions),
            ctypes.addressof(licence), 1 if log else 0, len(log) if log else 0,
            ctypes.addressof(log) if log else 0, 0, 0, b"anchorgpu_dev", 0, _BPF_CGROUP_DEVICE,
        )  # fmt: skip
        return _bpf(_BPF_PROG_LOAD, attr)[0]

    try:
        prog = load(None)
    except OSError as exc:  # loaded again with the verifier's log, for its words
        log = ctypes.create_string_buffer(1 << 16)
        with contextlib.suppress(OSError):
            load(log)
        detail = log.value.decode(errors="replace").strip().splitlines()[-3:]
        raise OSError(exc.errno, f"{exc.strerror}: {' / '.join(detail)}") from None
    try:
        folder = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _bpf(_BPF_PROG_ATTACH, struct.pack("<IIIII", folder, prog, _BPF_CGROUP_DEVICE, 0, 0))
        finally:
            os.close(folder)
    finally:
        os.close(prog)


def attached(group: str) -> int:
    """How many device programs are attached to the cgroup v2 folder `group` itself."""
    folder = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
    try:
        # BPF_PROG_QUERY: {target_fd, attach_type, query_flags, attach_flags, prog_ids,
        # prog_cnt}; with no prog_ids buffer it only writes the count back.
        _, answer = _bpf(_BPF_PROG_QUERY, struct.pack("<IIII", folder, _BPF_CGROUP_DEVICE, 0, 0))
        count: int = struct.unpack_from("<I", answer, 24)[0]
        return count
    finally:
        os.close(folder)
