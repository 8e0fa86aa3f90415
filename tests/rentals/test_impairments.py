"""A provider's faults as the simulator serves them, read into flags that tell a GPU that
cannot work: a fatal XID keeps its code, AMD's uncorrectable memory errors (RAS) hold a flag
open while the exporter reports them."""

import pytest

from catalog.models import ExporterKind
from telemetry.models import Flag, FlagKind
from telemetry.poll import poll_nodes
from telemetry.simulator import Simulator
from tests.support.factories.catalog import NodeFactory
from tests.telemetry.conftest import point_at

pytestmark = pytest.mark.django_db


@pytest.fixture
def simulator():
    state = {"nodes": {}}
    sim = Simulator(lambda: state["nodes"], refresh=0.0).start_in_thread()
    sim.state = state
    yield sim
    sim.stop()


def test_an_xid_keeps_its_code_and_amd_ras_errors_hold_a_flag_open(catalog, simulator):
    nvidia = NodeFactory(gpu_model=catalog.h100, gpus=2)
    amd = NodeFactory(gpu_model=catalog.mi300x, exporter=ExporterKind.AMD, gpus=2)
    point_at(simulator, [nvidia, amd])
    poll_nodes([nvidia.pk, amd.pk])
    assert not Flag.objects.exists()

    simulator.set_fault(nvidia.hostname, "xid", gpu=1, code=79)
    simulator.set_fault(amd.hostname, "ras", gpu=0)
    poll_nodes([nvidia.pk, amd.pk])
    xid = Flag.objects.get(kind=FlagKind.XID)
    ras = Flag.objects.get(kind=FlagKind.RAS)
    assert (xid.gpu.uuid, xid.code, xid.detail) == (f"GPU-{nvidia.hostname}-1", 79, "XID 79")
    assert (ras.gpu.index, ras.severity, ras.detail) == (
        0,
        "critical",
        "1 uncorrectable ECC errors",
    )

    simulator.set_fault(amd.hostname, "ok")
    poll_nodes([nvidia.pk, amd.pk])
    ras.refresh_from_db()
    xid.refresh_from_db()
    assert ras.closed_at is not None  # the driver reloaded: the count is back to zero
    assert xid.closed_at is None  # an XID is an event: it closes after a quiet time
