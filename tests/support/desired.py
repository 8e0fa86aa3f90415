"""Desired states as the console sends them to a node's agent, written by hand for the
agent's own tests (no console behind them)."""

import uuid
from datetime import UTC, datetime, timedelta

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk5m2jXbB1b0mGRs3c0xXn5xkq0V3YH1xQkz3x3x3x3"


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def entry(
    *, granted: bool = True, until: datetime = NOW + timedelta(days=1), gpus=(0, 1), keys=(KEY,)
) -> dict:
    """One allocation's entry: running since an hour before NOW, until `until`."""
    allocation = uuid.uuid4()
    return {
        "id": str(allocation), "login": f"agpu-{allocation.hex[:10]}", "state": "running",
        "granted": granted, "paid_from": iso(NOW - timedelta(hours=1)),
        "paid_until": iso(until), "gpus": [{"index": i, "uuid": f"GPU-{i}"} for i in gpus],
        "keys": list(keys) if granted else [], "cpus": 24 * len(gpus),
        "memory_mib": 256 * 1024 * len(gpus),
    }  # fmt: skip


def state(*entries: dict) -> dict:
    """A node's desired state holding `entries`, with a fresh generation."""
    return {"generation": uuid.uuid4().hex, "node": "n1", "gpu_variable": "CUDA_VISIBLE_DEVICES",
            "allocations": list(entries)}  # fmt: skip
