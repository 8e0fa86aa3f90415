""" "Will it run?": the rules case by case against their sources. Each case cites the line
of docs/reference/software-compatibility.md (and its source key, §7) it comes from; the
builds and toolkits are read from the shipped reference tables (sizing 0002), as the API
reads them."""

import pytest

from sizing import compatibility
from sizing.compat_services import compatibility_request_check, reference_tables

pytestmark = pytest.mark.django_db

H100 = {"name": "H100", "vendor": "nvidia", "target": "9.0"}
A100 = {"name": "A100", "vendor": "nvidia", "target": "8.0"}
L40S = {"name": "L40S", "vendor": "nvidia", "target": "8.9"}
L4 = {"name": "L4", "vendor": "nvidia", "target": "8.9"}
T4 = {"name": "T4", "vendor": "nvidia", "target": "7.5"}
V100 = {"name": "V100", "vendor": "nvidia", "target": "7.0"}
B200 = {"name": "B200", "vendor": "nvidia", "target": "10.0"}
RTX5090 = {"name": "RTX 5090", "vendor": "nvidia", "target": "12.0", "data_center": False}
MI300X = {"name": "MI300X", "vendor": "amd", "target": "gfx942", "bf16": True, "fp8": True}
MI355X = {"name": "MI355X", "vendor": "amd", "target": "gfx950"}

# (request, GPU, its stack, features, runs, the rules expected (rule: ok), the source line)
CASES = [
    (("pytorch", "2.7", "cu128"), H100, {"driver": "570.124.06"}, (), True,
     {"arch_sass": True, "driver_meets": True},
     "§1 N1: 12.8 | GA ≥ 570.26; §3 P5: 2.7 cu128 7.5;8.0;8.6;9.0;10.0;12.0"),
    (("pytorch", "2.7", "cu128"), V100, {"driver": "570.124.06"}, (), False,
     {"arch_missing": False},
     "§3 P5: 2.7 cu128 (sm_70 dropped in #147607 … 2.7.1+cu128 lacks sm_70)"),
    (("pytorch", "2.8", "cu128"), V100, {"driver": "575.57.08"}, (), True,
     {"arch_sass": True, "driver_meets": True},
     "§3 P5 #157558: 2.8 cu128 7.0;7.5;… (sm_70 re-added)"),
    (("pytorch", "2.11", "cu128"), V100, {"driver": "580.65.06"}, (), False,
     {"arch_missing": False}, "§3 P4 #172352: 2.11 cu128 7.5,8.0,… (Volta dropped)"),
    (("pytorch", "2.6", "cu124"), B200, {"driver": "580.65.06"}, (), False,
     {"arch_missing": False},
     "§3 derived: B200/GB200 (10.0) … need cu128+ from 2.7 onward"),
    (("pytorch", "2.7", "cu128"), RTX5090, {"driver": "570.124.06"}, (), True,
     {"arch_sass": True}, "§3: RTX 5090 (12.0) need cu128+ from 2.7 onward; §2 N8 CC 12.0"),
    (("pytorch", "2.9", "cu130"), B200, {"driver": "570.124.06"}, (), False,
     {"forward_compat": False},
     "§0 R1: 13.x ≥ 580; R4: older than the build's major → cuda-compat (data-center GPUs)"),
    (("pytorch", "2.9", "cu130"), RTX5090, {"driver": "570.124.06"}, (), False,
     {"forward_compat_not_this_gpu": False},
     "§1 N3: forward-compat GPUs: data center, select NGC RTX SKUs, Jetson (GeForce excluded)"),
    (("pytorch", "2.6", "cu126"), L40S, {"driver": "560.35.05"}, (), True,
     {"arch_sass": True, "driver_meets": True},
     "§3 derived: L4/L40S/4090 (8.9) run sm_86 SASS; §1 N1: 12.6 GA ≥ 560.28.03"),
    (("pytorch", "2.6", "cu126"), H100, {"driver": "550.127.05"}, (), True,
     {"minor_compat": True},
     "§0 R1: 12.x ≥ 525 (minor-version compat); R2: below 560.28.03 → limited feature set"),
    (("pytorch", "2.6", "cu126"), H100, {"driver": "470.82.01"}, (), False,
     {"forward_compat": False}, "§0 R1: 12.x ≥ 525; R4 (N3): cuda-compat-12-6"),
    (("pytorch", "2.7", "cu128"), H100, {"cuda": "12.4"}, (), True, {"minor_compat": True},
     "§0 R5 (N5): nvidia-smi's CUDA Version is the driver's highest; R1 12.x ≥ 525"),
    (("pytorch", "2.7", "cu128"), H100, {}, (), None, {"stack_unknown": None},
     "issue 51: a node whose stack is unknown says unknown, never a guess"),
    (("pytorch", "2.5", "cu118"), T4, {"driver": "535.104.05"}, ("bf16",), False,
     {"bf16": False}, "§4 F2: BF16 requires compute capability 8.0 or higher"),
    (("pytorch", "2.7", "cu128"), A100, {"driver": "570.124.06"}, ("bf16", "fp8"), False,
     {"bf16": True, "fp8": False}, "§4 F2: FP8 (per-tensor) requires compute capability 8.9"),
    (("pytorch", "2.7", "cu128"), L4, {"driver": "570.124.06"}, ("fp8",), True,
     {"fp8": True}, "§4 F2: 8.9 or higher; §2 N8: L4 8.9"),
    (("pytorch", "2.6", "cu124"), H100, {"driver": "550.54.15"}, ("flash-attention-3",),
     True, {"fa3": True}, "§4 F1: FA3 Requirements: H100 / H800 GPU, CUDA >= 12.3"),
    (("pytorch", "2.6", "cu124"), A100, {"driver": "550.54.15"}, ("flash-attention-3",),
     False, {"fa3": False}, "§4 F1: FA3 optimized for Hopper GPUs"),
    (("pytorch", "2.5", "cu118"), A100, {"driver": "535.104.05"}, ("flash-attention-2",),
     False, {"fa_toolkit": False}, "§4 F1: FlashAttention-2 CUDA ≥ 12.0"),
    (("pytorch", "2.7", "cu128"), B200, {"driver": "570.124.06"}, ("flash-attention-2",),
     None, {"fa2_blackwell": None}, "§4 F1: Blackwell (10.x/12.x) not listed — not confirmed"),
    (("vllm", "0.32", "cu128"), T4, {"driver": "570.124.06"}, (), True, {"arch_floor": True},
     "§4 V1: GPU: compute capability 7.5 or higher (e.g., T4 …)"),
    (("vllm", "0.32", "cu128"), V100, {"driver": "570.124.06"}, (), False,
     {"arch_below_floor": False}, "§4 V1: compute capability 7.5 or higher"),
    (("cuda", "13.0", ""), V100, {"driver": "580.65.06"}, (), False,
     {"arch_cuda13_dropped": False},
     "§2 N12: Offline compilation … removed in CUDA Toolkit 13.0 ⇒ CC < 7.5"),
    (("cuda", "12.6", ""), B200, {"driver": "580.65.06"}, (), False,
     {"arch_blackwell_toolkit": False},
     "§2 N11: With versions 12.8 of the CUDA Toolkit, nvcc can generate cubin … 10.0"),
    (("cuda", "12.9", ""), H100, {"driver": "575.51.03"}, (), True, {"driver_meets": True},
     "§1 N1: 12.9 GA ≥ 575.51.03"),
    (("pytorch", "2.7", "rocm6.3"), MI300X, {"rocm": "6.3.3"}, ("bf16", "fp8"), True,
     {"gfx_listed": True, "rocm_window": True, "feature_catalog": True},
     "§5 A1: 6.0.0 – 6.3.3 gfx942 yes; A4: +/- 2 releases"),
    (("pytorch", "2.6", "rocm6.1"), MI300X, {"rocm": "7.1.1"}, (), False,
     {"rocm_outside_window": False}, "§5 A4: forward and backward compatibility … +/- 2"),
    (("pytorch", "2.8", "rocm6.4"), MI300X, {"rocm": "6.4.1"}, (), None,
     {"gfx_release_unread": None}, "§5: 6.4.x not confirmed (6.4 matrix column not retrieved)"),
    (("pytorch", "2.7", "rocm6.3"), MI355X, {"rocm": "6.3.3"}, (), False,
     {"gfx950_needs_7": False}, "§5 V1: MI350 requires ROCm 7.0 or above"),
    (("vllm", "0.32", "rocm"), MI300X, {"rocm": "6.2.4"}, (), False, {"rocm_floor": False},
     "§4 V1: ROCm ≥ 6.3"),
    (("vllm", "0.32", "rocm"), MI355X, {"rocm": "7.1.1"}, (), True, {"rocm_floor": True},
     "§4 V1: MI350 needs ROCm ≥ 7.0"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("request_", "gpu", "stack", "features", "runs", "rules", "source"),
    CASES,
    ids=[f"{c[0][0]}-{c[0][1]}-{c[0][2]}-{c[1]['name']}-{c[6][:12]}" for c in CASES],
)
def test_a_rule_against_its_source(request_, gpu, stack, features, runs, rules, source):
    framework, version, build = request_
    asked, _row = compatibility_request_check(framework=framework, version=version, build=build)
    verdict = compatibility.check(
        asked, compatibility.Gpu(**gpu, **stack), reference_tables(), features
    )
    found = {reason.rule: reason.ok for reason in verdict.reasons}
    assert {rule: found.get(rule, "absent") for rule in rules} == rules, source
    assert verdict.runs is runs, source
    # every reason cites a source, but those that say no source or report was there
    unsourced = {"stack_unknown", "gfx_release_unread", "toolkit_unknown", "feature_unchecked"}
    assert all(reason.sources for reason in verdict.reasons if reason.rule not in unsourced)


def test_ptx_runs_a_newer_gpu_only_on_a_driver_new_enough_to_jit_it():
    """§0 R2 (N2): applications that compile device code to PTX will not work on older
    drivers; R3 (N10): PTX for an older CC is JIT-compiled for newer GPUs."""
    ptx_only = compatibility.Build(framework="pytorch", version="9.9", build="cu129",
                                   stack="cuda", toolkit="12.9", archs=("9.0",), ptx=True)  # fmt: skip
    ref = reference_tables()
    newer = compatibility.Gpu(name="next", vendor="nvidia", target="10.0", driver="580.65.06")
    assert compatibility.check(ptx_only, newer, ref).runs is True
    older_driver = compatibility.Gpu(name="next", vendor="nvidia", target="10.0",
                                     driver="560.35.05")  # fmt: skip
    verdict = compatibility.check(ptx_only, older_driver, ref)
    assert verdict.runs is False
    assert [r.rule for r in verdict.reasons] == ["arch_ptx", "minor_compat_no_ptx"]
