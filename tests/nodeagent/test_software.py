"""The node's software stack as the agent reads it from the vendors' tools: NVIDIA's
`nvidia-smi` (both header spellings) and AMD's `amd-smi` (captures/README.md says what the
texts are), and what an unknown stack looks like: empty, never a guess."""

from pathlib import Path

from nodeagent import software

CAPTURES = Path(__file__).parent / "captures"


def _read(name: str) -> str:
    return (CAPTURES / name).read_text()


def test_nvidia_query_gives_the_driver_and_each_gpus_compute_capability():
    driver, gpus = software.parse_nvidia_query(_read("nvidia-smi-query.csv"))
    assert driver == "580.65.06"
    assert gpus == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0"},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0"},
    ]


def test_the_query_with_only_the_two_fields_the_issue_names_reads_too():
    driver, gpus = software.parse_nvidia_query("driver_version, compute_cap\n550.54.15, 8.9\n")
    assert driver == "550.54.15" and gpus == [{"index": 0, "name": "", "compute_cap": "8.9"}]


def test_nvidia_smi_q_header_cuda_version_and_the_newer_cuda_umd_version():
    assert software.parse_nvidia_q(_read("nvidia-smi-q-580.txt")) == ("580.65.06", "13.0")
    # 610.x drivers say "KMD Version" and "CUDA UMD Version"; a GPU's own "CUDA Version:
    # N/A" further down is not the header's
    assert software.parse_nvidia_q(_read("nvidia-smi-q-610.txt")) == ("610.57.04", "13.3")


def test_amd_smi_version_with_and_without_the_amdgpu_field():
    assert software.parse_amd_version(_read("amd-smi-version.txt")) == ("7.1.1", "6.16.6")
    assert software.parse_amd_version(_read("amd-smi-version-old.txt")) == ("6.1.0", "")


def test_amd_smi_static_gives_each_gpus_gfx_target_and_the_driver():
    driver, gpus = software.parse_amd_static(_read("amd-smi-static.txt"))
    assert driver == "6.14.4"
    assert gpus == [
        {"index": 0, "name": "AMD Instinct MI300X", "gfx_target": "gfx942"},
        {"index": 1, "name": "AMD Instinct MI300X", "gfx_target": "gfx942"},
    ]


def _runner(outputs):
    return lambda *argv: outputs.get(argv[:2], "")


def test_the_stack_of_an_nvidia_node(tmp_path):
    (tmp_path / "os-release").write_text('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 24.04.2 LTS"\n')
    run = _runner({
        ("nvidia-smi", "--query-gpu=index,name,driver_version,compute_cap"):
            _read("nvidia-smi-query.csv"),
        ("nvidia-smi", "-q"): _read("nvidia-smi-q-580.txt"),
    })  # fmt: skip
    found = software.stack(run=run, os_release=tmp_path / "os-release")
    assert found["vendor"] == "nvidia" and found["driver"] == "580.65.06"
    assert found["cuda"] == "13.0" and found["rocm"] == "" and found["os"] == "Ubuntu 24.04.2 LTS"
    assert [g["compute_cap"] for g in found["gpus"]] == ["9.0", "9.0"] and found["kernel"]


def test_the_stack_of_an_amd_node(tmp_path):
    run = _runner({
        ("amd-smi", "version"): _read("amd-smi-version.txt"),
        ("amd-smi", "static"): _read("amd-smi-static.txt"),
    })  # fmt: skip
    found = software.stack(run=run, os_release=tmp_path / "missing")
    assert (found["vendor"], found["rocm"], found["amdgpu"]) == ("amd", "7.1.1", "6.16.6")
    assert [g["gfx_target"] for g in found["gpus"]] == ["gfx942", "gfx942"]
    assert found["os"] == ""


def test_a_node_whose_tools_say_nothing_reports_an_empty_stack(tmp_path):
    found = software.stack(run=lambda *argv: "", os_release=tmp_path / "missing")
    assert (found["vendor"], found["driver"], found["cuda"], found["rocm"]) == ("", "", "", "")
