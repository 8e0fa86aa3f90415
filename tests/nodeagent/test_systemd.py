"""The systemd kind's drop-in for a tenant's user-<UID>.slice, exactly: systemd's own
settings, so a daemon-reload keeps them (rules written to cgroupfs behind its back would
be dropped)."""

from nodeagent.cgroups import Policy
from nodeagent.devices import SHELL_DEVICES, Rule
from nodeagent.systemd import SystemdSlices, dropin_text


def test_the_slice_drop_in_names_each_device_and_the_share_sold(tmp_path):
    policy = Policy(
        devices=(
            Rule("c", 195, 2, "/dev/nvidia2"),
            Rule("c", 195, 255, "/dev/nvidiactl"),
            Rule("c", 509, 0, "/dev/nvidia-uvm"),
            Rule("c", 509, 1, "/dev/nvidia-uvm-tools"),
            *SHELL_DEVICES,
        ),
        cpus=24,
        memory_bytes=256 * 2**30,
        tasks=4096,
    )
    assert dropin_text("agpu-1a2b3c4d5e", policy) == (
        "# Written by the AnchorGPU agent for agpu-1a2b3c4d5e; removed when the allocation ends.\n"
        "[Slice]\n"
        "DevicePolicy=closed\n"
        "DeviceAllow=/dev/nvidia2 rw\n"
        "DeviceAllow=/dev/nvidiactl rw\n"
        "DeviceAllow=/dev/nvidia-uvm rw\n"
        "DeviceAllow=/dev/nvidia-uvm-tools rw\n"
        "DeviceAllow=/dev/null rw\n"
        "DeviceAllow=/dev/zero rw\n"
        "DeviceAllow=/dev/full rw\n"
        "DeviceAllow=/dev/random rw\n"
        "DeviceAllow=/dev/urandom rw\n"
        "DeviceAllow=/dev/tty rw\n"
        "DeviceAllow=/dev/ptmx rw\n"
        "DeviceAllow=char-pts rw\n"
        "CPUQuota=2400%\n"
        "MemoryMax=274877906944\n"
        "MemorySwapMax=0\n"
        "TasksMax=4096\n"
    )
    slices = SystemdSlices(units=tmp_path, systemctl="true")
    slices.apply("agpu-1a2b3c4d5e", 1_000_042, policy)
    written = tmp_path / "user-1000042.slice.d" / "50-anchorgpu.conf"
    assert written.read_text() == dropin_text("agpu-1a2b3c4d5e", policy)
    slices.remove("agpu-1a2b3c4d5e", 1_000_042)
    assert not written.parent.exists()
