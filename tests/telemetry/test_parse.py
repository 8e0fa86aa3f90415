"""Exporter parsing over the reference fixtures and every malformation the field has shown."""

from pathlib import Path

import pytest

from telemetry.parse import ScrapeError, parse_exporter

FIXTURES = Path(__file__).parent / "fixtures"
H100_A = "GPU-11111111-2222-3333-4444-555555555555"
H100_B = "GPU-66666666-7777-8888-9999-aaaaaaaaaaaa"


def parse_dcgm(text):
    return parse_exporter(text, exporter="dcgm")


def parse_amd(text, prefix=""):
    return parse_exporter(text, exporter="amd", prefix=prefix)


def fixture(name):
    return (FIXTURES / name).read_text()


def test_dcgm_released_fixture_normalised():
    scrape = parse_dcgm(fixture("dcgm_released_2gpu.prom"))
    a, b = scrape.readings[H100_A], scrape.readings[H100_B]
    assert (a.index, a.utilization, a.temperature_c, a.power_w) == (0, 0.0, 26.0, 67.351)
    assert (b.utilization, b.memory_used_mib, b.memory_total_mib) == (97.0, 39872.0, 81559.0)
    assert a.energy_j == pytest.approx(4742.776)  # mJ counter → J
    assert (a.xid, b.xid) == (0, 79)
    assert scrape.problems == []


def test_dcgm_master_hostname_and_mig_labels():
    scrape = parse_dcgm(fixture("dcgm_k8s_mig_master.prom"))
    assert scrape.readings[H100_A].memory_used_mib == 15866
    assert scrape.readings[H100_B].memory_used_mib == 0
    assert scrape.readings[H100_A].utilization is None  # missing, never zero


def test_readme_quickstart_space_after_comma_and_sentinel():
    text = fixture("dcgm_readme_quickstart.prom").replace("MEMORY_TEMP", "GPU_TEMP")
    scrape = parse_dcgm(text)
    reading = scrape.readings["GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"]
    assert (reading.index, reading.temperature_c) == (0, None)
    assert scrape.gpu_families == 2


@pytest.mark.parametrize("raw", ["9223372036854775794", "9223372036854776000", "2147483633"])
def test_dcgm_sentinels(raw):
    text = f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-x"}} {raw}\n'
    assert parse_dcgm(text).readings["GPU-x"].temperature_c is None


@pytest.mark.parametrize("raw", ["NaN", "+Inf", "-Inf"])
def test_non_finite_values_are_dropped_with_a_problem(raw):
    scrape = parse_dcgm(f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-x"}} {raw}\n')
    assert scrape.readings["GPU-x"].power_w is None
    assert len(scrape.problems) == 1 and scrape.problems[0].endswith("ignored")


def test_duplicate_series_last_wins_and_is_reported():
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 10\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 20\n'
    )
    scrape = parse_dcgm(text)
    assert scrape.readings["GPU-x"].utilization == 20
    assert "duplicate" in scrape.problems[0]


def test_hostname_in_either_case_and_label_order_do_not_matter():
    upper = 'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-x",Hostname="h",gpu="0"} 5\n'
    lower = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",hostname="h",UUID="GPU-x"} 5\n'
    assert parse_dcgm(upper).readings["GPU-x"].utilization == 5
    assert parse_dcgm(lower).readings["GPU-x"].utilization == 5


def test_mig_only_nodes_use_the_profiling_ratio():
    text = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-x",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3"} 0.5\n'
    assert parse_dcgm(text).readings["GPU-x"].utilization == 50.0


@pytest.mark.parametrize(
    "body",
    [
        "<html><body>502 Bad Gateway</body></html>",
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GP',
        "DCGM_FI_DEV_GPU_UTIL{gpu=0} 1",
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} abc',
    ],
)
def test_malformed_bodies_are_rejected_whole(body):
    with pytest.raises(ScrapeError):
        parse_dcgm(fixture("dcgm_released_2gpu.prom") + body + "\n")


def test_empty_body_has_no_gpu_families():
    scrape = parse_dcgm("")
    assert scrape.gpu_families == 0 and scrape.readings == {}


def test_amd_fixture_units():
    scrape = parse_amd(fixture("amd_dme_2gpu.prom"))
    gpu0, gpu1 = scrape.readings["692400000001"], scrape.readings["692400000002"]
    assert (gpu0.index, gpu1.utilization, gpu1.temperature_c, gpu1.power_w) == (0, 87, 63, 612)
    assert gpu1.memory_used_mib == pytest.approx(150112 * 1e6 / 2**20)  # MB → MiB
    assert gpu0.memory_total_mib == pytest.approx(196592 * 1e6 / 2**20)
    assert gpu0.energy_j == pytest.approx(12345.678912)  # µJ → J
    assert gpu1.energy_j is None


def test_amd_prefix_is_stripped():
    text = fixture("amd_dme_2gpu.prom").replace("gpu_", "amd_gpu_")
    scrape = parse_amd(text, prefix="amd_")
    assert scrape.readings["692400000002"].utilization == 87


def test_amd_only_promhttp_families_is_an_exporter_fault():
    text = (
        "# TYPE promhttp_metric_handler_requests_total counter\n"
        'promhttp_metric_handler_requests_total{code="200"} 3\n'
    )
    assert parse_amd(text).gpu_families == 0


def test_amd_commas_inside_label_values():
    text = (
        'gpu_gfx_activity{card_vendor="Advanced Micro Devices, Inc. [AMD/ATI]",gpu_id="0",'
        'gpu_partition_id="0",serial_number="S1",kfd_process_id="123,456"} 42\n'
    )
    assert parse_amd(text).readings["S1"].utilization == 42


def test_amd_without_serials_keys_gpus_by_gpu_id():
    text = fixture("amd_dme_2gpu.prom").replace('serial_number="692400000001"', 'serial_number=""')
    scrape = parse_amd(text)
    assert scrape.readings["gpu_id:0"].utilization == 0
    assert scrape.readings["692400000002"].utilization == 87


@pytest.mark.parametrize(
    ("raw", "joules"),
    [
        ("4742776", 4742.776),  # dcgm's fixture: mJ since boot
        ("3600000000000000", 3.6e12),  # 3.6e15 mJ: years at 700 W, still a counter
    ],
)
def test_dcgm_energy_is_a_counter_of_any_real_size(raw, joules):
    text = f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="0",UUID="GPU-x"}} {raw}\n'
    scrape = parse_dcgm(text)
    assert scrape.readings["GPU-x"].energy_j == pytest.approx(joules)
    assert scrape.problems == []


def test_amd_microjoule_counter_after_days_at_full_power_is_kept():
    # 750 W for 3 days in µJ: 1.9e14, past the FP64 blank that used to swallow it
    value = 750 * 3 * 86400 * 1e6
    text = f'gpu_energy_consumed{{gpu_id="0",serial_number="S1"}} {value:.10g}\n'
    scrape = parse_amd(text)
    assert scrape.readings["S1"].energy_j == pytest.approx(750 * 3 * 86400)
    assert scrape.problems == []


@pytest.mark.parametrize(
    ("family", "raw"),
    [
        ("DCGM_FI_DEV_GPU_TEMP", "9223372036854775794"),
        ("DCGM_FI_DEV_GPU_UTIL", "2147483632"),
        ("DCGM_FI_DEV_POWER_USAGE", "140737488355328"),  # FP64 blank, 2**47
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "9223372036854775792"),
    ],
)
def test_every_dropped_blank_is_a_parse_problem(family, raw):
    scrape = parse_dcgm(f'{family}{{gpu="0",UUID="GPU-x"}} {raw}\n')
    reading = scrape.readings["GPU-x"]
    assert (reading.temperature_c, reading.utilization, reading.power_w, reading.energy_j) == (
        None,
        None,
        None,
        None,
    )
    assert scrape.problems == [f"{family} for GPU-x is a DCGM blank ({raw}): ignored"]


def test_the_exporters_driver_label_is_read_where_the_exporter_declares_one():
    from telemetry.simulator import SimGpu, SimNode, render_dcgm

    node = SimNode("n1", "dcgm", "H100", 81559, [SimGpu(0, "GPU-a", "free")], driver="570.124.06")
    assert parse_dcgm(render_dcgm(node, 0.0)).driver == "570.124.06"
    node.driver = ""
    assert parse_dcgm(render_dcgm(node, 0.0)).driver == ""
